"""Suites and plans: every invalid field is refused with the file and the field named."""

from pathlib import Path

import pytest
import yaml

from dlperf_core.cluster.inventory import load_inventory
from dlperf_core.errors import ConfigError
from dlperf_core.model import series_base
from dlperf_core.plan.cases import PlanFilters, check_suite, expand_cases, plan_suite
from dlperf_core.plan.suite import load_suite

REPO = Path(__file__).resolve().parents[3]

GOOD = {
    "name": "t",
    "repeats": 2,
    "benchmarks": [
        {
            "framework": "pytorch_reference",
            "model": "resnet50_v1.5",
            "precisions": ["fp32", "amp"],
            "batch_size_per_device": {"fp32": 8, "amp": 16},
            "topologies": ["1n1g", "1n2g", "2n1g"],
        }
    ],
}


def write(tmp_path: Path, data, name="suite.yaml") -> Path:
    p = tmp_path / name
    p.write_text(data if isinstance(data, str) else yaml.safe_dump(data))
    return p


def refused(tmp_path, data) -> ConfigError:
    path = write(tmp_path, data)
    with pytest.raises(ConfigError) as info:
        check_suite(load_suite(path))  # the file's shape, then the adapters' (planning)
    assert str(path) in str(info.value)
    return info.value


def test_repository_suites_load():
    for path in (REPO / "suites").glob("*.yaml"):
        suite = load_suite(path)
        assert suite.benchmarks


def test_plan_expands_precisions_batches_topologies_repeats(tmp_path):
    suite = load_suite(write(tmp_path, GOOD))
    inv = load_inventory(REPO / "inventories/local.yaml")
    runs = plan_suite(suite, inv)
    keys = [series_base(r.case.key) for r in runs]  # the readable part (+args= is test_configuration_identity's)
    assert len(runs) == 2 * 3 * 2
    assert keys[0] == "pytorch_reference/resnet50_v1.5/fp32/b8/1n1g"
    assert "pytorch_reference/resnet50_v1.5/amp/b16/2n1g" in keys
    assert [r.index for r in runs] == list(range(12)) and all(r.total == 12 for r in runs)
    only = plan_suite(suite, inv, PlanFilters(precisions=("amp",), topologies=("1n2g",), repeats=3))
    assert [(series_base(r.case.key), r.repeat) for r in only] == [
        ("pytorch_reference/resnet50_v1.5/amp/b16/1n2g", i) for i in range(3)
    ]


@pytest.mark.parametrize(
    "mutate, field",
    [
        (lambda d: d["benchmarks"][0].update(framework="tensorflow9"), "benchmarks[0].framework"),
        (lambda d: d["benchmarks"][0].update(model="vgg"), "model"),
        (lambda d: d["benchmarks"][0].update(topologies=["1n1g", "8x"]), "benchmarks[0].topologies[1]"),
        (lambda d: d["benchmarks"][0].update(precisions=["fp8"]), "benchmarks[0].precisions[0]"),
        (lambda d: d.update(repeats=0), "repeats"),
        (lambda d: d["benchmarks"][0].update(batch_size_per_device={"fp32": -8}), "batch_size_per_device"),
        (lambda d: d["benchmarks"][0].update(options={"no_such_option": 1}), "no_such_option"),
        (lambda d: d.update(warmup_iterations=-1), "warmup_iterations"),
        (lambda d: d.update(colour="blue"), "colour: unknown field"),
        (lambda d: d.update(benchmarks=[]), "benchmarks"),
        (lambda d: d["benchmarks"][0].update(batch_size_per_device=0), "batch_size_per_device"),
    ],
)
def test_invalid_field_is_named(tmp_path, mutate, field):
    import copy

    data = copy.deepcopy(GOOD)
    mutate(data)
    err = refused(tmp_path, data)
    assert field in str(err), str(err)


def test_not_yaml_and_not_a_mapping(tmp_path):
    assert "not valid YAML" in str(refused(tmp_path, "name: [unclosed"))
    assert "mapping" in str(refused(tmp_path, "- just\n- a list\n"))


def test_missing_file_is_named(tmp_path):
    with pytest.raises(ConfigError, match="file not found"):
        load_suite(tmp_path / "nope.yaml")


def test_topology_larger_than_inventory_is_refused_before_running(tmp_path):
    data = dict(GOOD, benchmarks=[dict(GOOD["benchmarks"][0], topologies=["4n8g"])])
    suite = load_suite(write(tmp_path, data))
    with pytest.raises(ConfigError, match="needs 4 nodes"):
        plan_suite(suite, load_inventory(REPO / "inventories/local.yaml"))
    data = dict(GOOD, benchmarks=[dict(GOOD["benchmarks"][0], topologies=["1n8g"])])
    with pytest.raises(ConfigError, match="needs 8 devices per node"):
        plan_suite(load_suite(write(tmp_path, data)), load_inventory(REPO / "inventories/local.yaml"))


def test_inventory_errors_name_the_field(tmp_path):
    p = write(tmp_path, {"nodes": [{"name": "a", "gpus": 0}, {"name": "a"}]}, "inv.yaml")
    with pytest.raises(ConfigError) as info:
        load_inventory(p)
    assert "nodes[0].gpus" in str(info.value) and str(p) in str(info.value)


def test_a_precision_without_batch_falls_back_to_the_seed_default(tmp_path):
    data = {
        "name": "t",
        "benchmarks": [{"framework": "ngc_pytorch", "model": "resnet50_v1.5", "precisions": ["fp32", "amp"]}],
    }
    suite = load_suite(write(tmp_path, data))
    cases = [c for c, _ in expand_cases(suite)]
    assert [(c.precision, c.batch_size_per_device) for c in cases] == [("fp32", 128), ("amp", 256)]
    # the seed's window (20 warm-up + 100 measured) unless the suite sets its own
    assert {(c.warmup_iterations, c.measured_iterations) for c in cases} == {(20, 100)}
    data["warmup_iterations"] = 7
    suite = load_suite(write(tmp_path, data))
    assert {c.warmup_iterations for c, _ in expand_cases(suite)} == {7}


def test_options_make_distinct_cases(tmp_path):
    bench = {"framework": "ngc_pytorch", "model": "resnet50_v1.5", "precisions": ["amp"]}
    data = {"name": "t", "benchmarks": [{**bench, "options": {"loss_scale": "static"}}, bench]}
    keys = [series_base(c.key) for c, _ in expand_cases(load_suite(write(tmp_path, data)))]
    assert keys == [
        "ngc_pytorch/resnet50_v1.5/amp/b256/1n1g+loss_scale=static",
        "ngc_pytorch/resnet50_v1.5/amp/b256/1n1g",
    ]
    bad = {"name": "t", "benchmarks": [{**bench, "options": {"loss_scale": "sometimes"}}]}
    with pytest.raises(ConfigError, match="loss_scale='sometimes' is not one of dynamic, static"):
        check_suite(load_suite(write(tmp_path, bad)))


def test_the_fabric_benchmark_key_and_its_older_name_plan_the_same_cases(tmp_path):
    """``fabric_benchmark:`` is the key; ``fabric_probe:``, the older one (the suites in ``suites/`` use it), is read
    the same; both at once is refused by name."""
    from dlperf_core.plan.cases import fabric_cases

    inventory = load_inventory(REPO / "inventories" / "docker-local.yaml")
    section = {"min_bytes": 1048576, "max_bytes": 4194304, "warmup": 2, "iters": 5, "repeats": 1}
    planned = []
    for key in ("fabric_benchmark", "fabric_probe"):
        suite = load_suite(write(tmp_path, {**GOOD, key: section}, f"{key}.yaml"))
        assert suite.fabric_benchmark is not None and suite.fabric_benchmark.max_bytes == 4194304
        planned.append([(r.case.key, r.repeat) for r in plan_suite(suite, inventory)])
        cases = [case for case, _ in fabric_cases(suite, [r.case for r in plan_suite(suite, inventory)])]
        assert {c.framework for c in cases} == {"allreduce_probe"} and len(cases) == 3
    assert planned[0] == planned[1]
    err = refused(tmp_path, {**GOOD, "fabric_benchmark": section, "fabric_probe": section})
    assert "fabric_benchmark or its older name fabric_probe, not both" in str(err)
