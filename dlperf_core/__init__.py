"""dlperf core library: what to run, where, one case run, its figures, what others published, and where it is kept.

No Airflow import anywhere in this package: ``dags/`` and ``plugins/`` wire it into Airflow. Importing the package
itself is cheap (the training workload imports only torch). Its map (CONTRIBUTING.md, "Layering"):

* :mod:`dlperf_core.plan`: what to run: suites, the trigger form, the deployment's defaults, the plan of case runs;
* :mod:`dlperf_core.cluster`: where it runs: the inventory of nodes, their checks, CPU placement, SSH keys,
  containers, GPU sampling and the environment probed on them;
* :mod:`dlperf_core.run`: one case run: its job, the runtimes (:mod:`dlperf_core.run.runtime`), its launch spec,
  the hand-offs between DAG tasks, a benchmark run's status;
* :mod:`dlperf_core.frameworks`: the framework adapters (launch commands, container specs, images, log formats);
* :mod:`dlperf_core.parsing`: the log parsers (pure functions over text);
* :mod:`dlperf_core.measure`: from a case run to figures: the measurement, efficiency, the unreliable rule,
  regressions, comparisons, the max batch size search;
* :mod:`dlperf_core.importers`: what others published, read in (DLPerf-style log folders, MLPerf submissions);
* :mod:`dlperf_core.storage`: the results database (tables declared once, migrations, writes, reads, the spool);
* :mod:`dlperf_core.reporting`: reports, tables and plots;
* :mod:`dlperf_core.workload`: the reference training workloads that run on the nodes.

Beside them: :mod:`~dlperf_core.model` (the shared types), :mod:`~dlperf_core.errors`,
:mod:`~dlperf_core.json_form` (the JSON form of a hand-off) and :mod:`~dlperf_core.home` (dlperf's folders).
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.util
import sys
from importlib.machinery import ModuleSpec
from types import ModuleType

__version__ = "0.1.0"

MOVED: dict[str, str] = {}  # filled below: {old module path: where it is now}, both under dlperf_core


class _MovedModules(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """A module's path from before the subpackages imports the module where it is now (the same module object, not
    a copy): an XCom value written by an older dlperf names its class by module (``dlperf_core.handoff.PlannedRun``,
    now ``dlperf_core.run.handoff.PlannedRun``), and Airflow imports that path to read it back."""

    # the finder protocol's signature: where (path) and what for (target) do not matter here
    def find_spec(self, fullname: str, path: object = None, target: object = None) -> ModuleSpec | None:  # noqa: ARG002
        old = fullname.removeprefix(__name__ + ".")
        return importlib.util.spec_from_loader(fullname, self) if old in MOVED and old != fullname else None

    def create_module(self, spec: ModuleSpec) -> ModuleType:
        return importlib.import_module(f"{__name__}.{MOVED[spec.name.removeprefix(__name__ + '.')]}")

    def exec_module(self, module: ModuleType) -> None:
        """The module ran where it is now."""


MOVED.update(
    {
        "accelerators": "cluster.accelerators",
        "commands": "run.commands",
        "compare": "measure.compare",
        "container": "cluster.container",
        "cpu_placement": "cluster.cpu_placement",
        "defaults": "plan.defaults",
        "dlperf_folder": "importers.dlperf_folder",
        "efficiency": "measure.efficiency",
        "environment": "cluster.environment",
        "form": "plan.form_choices",
        "gpu_sampling": "cluster.gpu_sampling",
        "handoff": "run.handoff",
        "inventory": "cluster.inventory",
        "jobs": "run.jobs",
        "launch_spec": "run.launch_spec",
        "log_import": "importers.log_import",
        "maxbatch": "measure.maxbatch",
        "mlperf": "importers.mlperf",
        "mlperf_comparison": "importers.mlperf_comparison",
        "noise": "measure.noise",
        "origin": "measure.origin",
        "preflight": "cluster.preflight",
        "regression": "measure.regression",
        "run_status": "run.run_status",
        "runtime": "run.runtime",
        "runtime.base": "run.runtime.base",
        "runtime.gang": "run.runtime.gang",
        "runtime.local": "run.runtime.local",
        "sshkeys": "cluster.sshkeys",
        "suite": "plan.suite",
        "trigger": "plan.trigger",
    }
)
sys.meta_path.insert(0, _MovedModules())
