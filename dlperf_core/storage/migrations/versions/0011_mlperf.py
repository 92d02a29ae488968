"""MLPerf Training results imported with their official scores (``dlperf import`` of a submission folder).

Revision ID: 0011
Revises: 0010
Create Date: 2026-11-27 00:00:00

* ``mlperf_systems``: one row per system description of a round (``<submitter>/systems/<system>.json``), unique on
  ``(ruleset, submitter_folder, system_folder)``; the description itself (JSON) and the environment row that
  holds it (accelerator model and count, host CPU, framework, CUDA / driver / cuDNN / NCCL where stated).
* ``mlperf_runs``: one row per run (``result_<n>.txt``) of a system and benchmark: time to train, converged,
  dlperf's throughput (samples over the steady spans) and the log's own figure, the spans, the global batch,
  the hyper-parameters, and the verdict and message of mlperf_logging's compliance checker.
* ``mlperf_official_scores``: per system and benchmark, the score mlperf_logging's result summarizer computes
  (minutes to train, the olympic mean; NULL when too many runs did not converge).
* View ``mlperf_scores``: one row per (ruleset, submitter folder, system folder, benchmark) with the score, the
  runs stored and those the checker accepted, and the system's nodes, accelerator model, memory and count,
  framework.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0011"
down_revision: str | Sequence[str] | None = "0010"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

MLPERF_SCORES = """
CREATE VIEW mlperf_scores AS
SELECT s.ruleset, s.submitter, s.submitter_folder, s.system_folder, s.system_name, o.benchmark, o.score_minutes,
       (SELECT COUNT(*) FROM mlperf_runs r WHERE r.system_id = s.id AND r.benchmark = o.benchmark) AS runs,
       (SELECT COUNT(*) FROM mlperf_runs r
         WHERE r.system_id = s.id AND r.benchmark = o.benchmark AND r.compliant) AS runs_compliant,
       s.nodes, s.accelerator_model, s.accelerator_memory, s.accelerators, s.framework, s.environment_id
FROM mlperf_official_scores o
JOIN mlperf_systems s ON s.id = o.system_id
"""


def upgrade() -> None:
    op.create_table(
        "mlperf_systems",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("ruleset", sa.Text(), nullable=False),
        sa.Column("submitter", sa.Text(), nullable=False),
        sa.Column("submitter_folder", sa.Text(), nullable=False),
        sa.Column("system_folder", sa.Text(), nullable=False),
        sa.Column("system_name", sa.Text(), nullable=False),
        sa.Column("division", sa.Text(), nullable=False),
        sa.Column("nodes", sa.Integer(), nullable=False),
        sa.Column("accelerators_per_node", sa.Integer(), nullable=False),
        sa.Column("accelerators", sa.Integer(), nullable=False),
        sa.Column("accelerator_model", sa.Text(), nullable=False),
        sa.Column("accelerator_memory", sa.Text(), nullable=False),
        sa.Column("host_processor_model", sa.Text(), nullable=False),
        sa.Column("host_processors_per_node", sa.Integer(), nullable=False),
        sa.Column("framework", sa.Text(), nullable=False),
        sa.Column("interconnect", sa.Text(), nullable=False),
        sa.Column("environment_id", sa.Integer(), nullable=True),
        sa.Column("description", sa.JSON(), nullable=False),
        sa.Column("imported_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["environment_id"],
            ["environments.id"],
            name=op.f("fk_mlperf_systems_environment_id_environments"),
            ondelete="SET NULL",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_mlperf_systems")),
        sa.UniqueConstraint(
            "ruleset",
            "submitter_folder",
            "system_folder",
            name=op.f("uq_mlperf_systems_ruleset_submitter_folder_system_folder"),
        ),
    )
    op.create_table(
        "mlperf_runs",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("system_id", sa.Integer(), nullable=False),
        sa.Column("benchmark", sa.Text(), nullable=False),
        sa.Column("result_file", sa.Text(), nullable=False),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("reason", sa.Text(), nullable=True),
        sa.Column("time_to_train_s", sa.Float(), nullable=True),
        sa.Column("converged", sa.Boolean(), nullable=True),
        sa.Column("throughput", sa.Float(), nullable=True),
        sa.Column("reported_throughput", sa.Float(), nullable=True),
        sa.Column("span_kind", sa.Text(), nullable=True),
        sa.Column("spans_measured", sa.Integer(), nullable=False),
        sa.Column("global_batch_size", sa.Integer(), nullable=True),
        sa.Column("compliant", sa.Boolean(), nullable=False),
        sa.Column("compliance_message", sa.Text(), nullable=False),
        sa.Column("hyperparameters", sa.JSON(), nullable=False),
        sa.CheckConstraint("status IN ('ok', 'failed')", name=op.f("ck_mlperf_runs_status")),
        sa.CheckConstraint(
            "status = 'failed' OR (throughput IS NOT NULL AND throughput > 0)",
            name=op.f("ck_mlperf_runs_ok_throughput"),
        ),
        sa.ForeignKeyConstraint(
            ["system_id"], ["mlperf_systems.id"], name=op.f("fk_mlperf_runs_system_id_mlperf_systems"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_mlperf_runs")),
        sa.UniqueConstraint(
            "system_id", "benchmark", "result_file", name=op.f("uq_mlperf_runs_system_id_benchmark_result_file")
        ),
    )
    op.create_table(
        "mlperf_official_scores",
        sa.Column("system_id", sa.Integer(), nullable=False),
        sa.Column("benchmark", sa.Text(), nullable=False),
        sa.Column("score_minutes", sa.Float(), nullable=True),
        sa.ForeignKeyConstraint(
            ["system_id"],
            ["mlperf_systems.id"],
            name=op.f("fk_mlperf_official_scores_system_id_mlperf_systems"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("system_id", "benchmark", name=op.f("pk_mlperf_official_scores")),
    )
    op.execute(MLPERF_SCORES)


def downgrade() -> None:
    op.execute("DROP VIEW IF EXISTS mlperf_scores")
    op.drop_table("mlperf_official_scores")
    op.drop_table("mlperf_runs")
    op.drop_table("mlperf_systems")
