# sparsepush.train(): sparsepush-train's run in this process. Its summary is a dict equal to the
# CLI's --summary JSON in every key that is not a time or a speed; its keywords are the CLI's long
# options, parsed and checked by the same library code (RunSpec, run_options). The helpers a Python
# training loop takes from the module (RunSpec.plan and .lr, ShardSampler, init_model) are checked
# against the CLI's rules here and, bit for bit, by examples/python/train_torch.py's ctest.
import json
import os
import subprocess
import threading
import time

import numpy as np
import pytest

import sparsepush

pytestmark = pytest.mark.skipif(not sparsepush.has_train, reason="module built without the reference backend")

DATA = sparsepush.RunSpec()["data"] if sparsepush.has_train else ""
HAVE_DATA = os.path.isfile(os.path.join(DATA, "train-images-idx3-ubyte.gz"))
needs_data = pytest.mark.skipif(not HAVE_DATA, reason="Fashion-MNIST is not installed (dataset-fashion-mnist)")
# a short MLP run with SCSP's final rounds: about ten rounds on 4 nodes
SHORT = dict(nodes=4, model="mlp", epochs=0.02, eval_samples=100, final_eval_samples=200, final_rounds=2, threads=1)
TIMES = {"wall_seconds", "train_seconds", "eval_seconds", "final_eval_seconds", "startup_seconds", "time_to_target_seconds",
         "train_seconds_to_target", "eval_seconds_to_target", "train_images_per_second", "wait_seconds_per_rank",
         "host_seconds", "clock"}


def cli_args(options):
    """The command line of keyword options, as RunSpec reads them (a float as its repr())."""
    args = []
    for k, v in options.items():
        flag = "--" + k.replace("_", "-")
        if v is True:
            args.append(flag)
        elif isinstance(v, (list, tuple)):
            for x in v:
                args += [flag, x]
        else:
            args += [flag, repr(v) if isinstance(v, float) else str(v)]
    return args


def same(a, b, where=""):
    """a == b with the same JSON types all the way down (an int is not a float, a float's bits)."""
    assert type(a) is type(b), f"{where}: {a!r} ({type(a).__name__}) vs {b!r} ({type(b).__name__})"
    if isinstance(a, dict):
        assert a.keys() == b.keys(), f"{where}: keys {sorted(a.keys() ^ b.keys())} differ"
        for k in a:
            same(a[k], b[k], f"{where}.{k}")
    elif isinstance(a, list):
        assert len(a) == len(b), f"{where}: {len(a)} vs {len(b)} elements"
        for i, (x, y) in enumerate(zip(a, b)):
            same(x, y, f"{where}[{i}]")
    else:
        assert a == b, f"{where}: {a!r} vs {b!r}"


@needs_data
def test_summary_equals_the_cli(tmp_path, capfd):
    cli = os.environ.get("SPARSEPUSH_TRAIN")
    if not cli:
        pytest.skip("SPARSEPUSH_TRAIN (the sparsepush-train built with the same flags as the module) is not set")
    mine = sparsepush.train(summary=str(tmp_path / "py.json"), **SHORT)
    assert capfd.readouterr().out == ""  # quiet without verbose=True
    subprocess.run([cli] + cli_args(SHORT) + ["--summary", str(tmp_path / "cli.json")], check=True,
                   stdout=subprocess.DEVNULL)
    with open(tmp_path / "cli.json") as f:
        theirs = json.load(f)
    with open(tmp_path / "py.json") as f:
        written = json.load(f)
    assert mine.keys() == theirs.keys()
    same({k: v for k, v in mine.items() if k not in TIMES}, {k: v for k, v in theirs.items() if k not in TIMES})
    same(written, mine)  # summary= writes the dict returned
    assert mine["algorithm"] == "scsp" and mine["final_rounds"] == 2 and mine["nodes"] == 4


@needs_data
def test_verbose_prints_progress_and_the_summary(capfd):
    s = sparsepush.train(nodes=2, model="mlp", epochs=0.005, eval_samples=50, final_eval_samples=50, final_rounds=1,
                         threads=1, verbose=True)
    out = capfd.readouterr().out
    assert "round " in out and '"averaged_model_test_accuracy"' in out
    assert s["rounds"] == s["final_rounds"] + round(0.005 * 30000 / 32)


@needs_data
def test_training_releases_the_gil():
    # this thread keeps running while another trains: its longest pause is a small part of the run
    # (were the GIL held while loading and training, it would be nearly all of it)
    done = {}
    th = threading.Thread(target=lambda: done.update(s=sparsepush.train(nodes=2, model="mlp", epochs=0.01, threads=1,
                                                                         eval_samples=50, final_eval_samples=50)))
    t0 = time.perf_counter()
    th.start()
    last, gap = t0, 0.0
    while th.is_alive():
        now = time.perf_counter()
        gap, last = max(gap, now - last), now
    th.join()
    took = time.perf_counter() - t0
    assert "s" in done and gap < 0.5 * took, f"longest pause {gap:.3f} s of a {took:.3f} s run"


@needs_data
def test_a_diverging_run_raises_naming_the_reason():
    with pytest.raises(sparsepush.DivergedError, match="lower --eta .* or --lr"):
        sparsepush.train(nodes=2, model="mlp", epochs=0.02, lr=1e6, momentum=0.0, eval_samples=50, final_eval_samples=50,
                         final_rounds=1, threads=1)


@needs_data
def test_a_target_stops_training_where_the_uninterrupted_run_first_reaches_it():
    opts = dict(nodes=4, model="mlp", epochs=0.1, eval_every=2, eval_samples=200, final_eval_samples=200,
                algorithm="sp", local_steps=2, threads=1)
    full = sparsepush.train(**opts)
    assert full["target_accuracy"] is None and full["local_steps"] == 2
    # a target the run reaches early: training stops there, with no final rounds for SP
    stopped = sparsepush.train(target_accuracy=0.3, **opts)
    assert stopped["target_reached"] is True
    assert stopped["accuracy_at_target"] >= 0.3
    assert stopped["rounds"] == stopped["rounds_to_target"] < full["rounds"]
    assert stopped["samples_to_target"] == stopped["rounds_to_target"] * 2 * 4 * 32  # H x nodes x batch
    assert 0 < stopped["bytes_to_target"] <= stopped["bytes_sent_total"] < full["bytes_sent_total"]
    never = sparsepush.train(target_accuracy=1.0, **opts)
    assert never["target_reached"] is False and never["rounds_to_target"] is None
    assert never["rounds"] == full["rounds"] and never["avg_test_accuracy"] == full["avg_test_accuracy"]


@needs_data
def test_split_evaluations_change_the_periodic_estimates_only(tmp_path):
    opts = dict(nodes=4, model="mlp", epochs=0.05, eval_every=4, eval_samples=201, final_eval_samples=200,
                algorithm="sp", threads=1)
    plain = sparsepush.train(log=str(tmp_path / "plain.csv"), **opts)
    split = sparsepush.train(eval_split=True, log=str(tmp_path / "split.csv"), **opts)
    assert plain["eval_split"] is False and split["eval_split"] is True
    for key in ("avg_test_accuracy", "averaged_model_test_accuracy", "loss", "bytes_sent_total", "rounds"):
        assert split[key] == plain[key], key  # training and the last evaluation are the plain run's

    def accuracies(path):
        rows = (path.read_text().splitlines())[1:]
        return [float(r.split(",")[4]) for r in rows]
    a, b = accuracies(tmp_path / "plain.csv"), accuracies(tmp_path / "split.csv")
    assert len(a) == len(b) >= 3
    assert a[-1] == b[-1]
    assert a[:-1] != b[:-1]  # 201 images in shares of 50, 50, 50, 51 are not each model on all of them
    with pytest.raises(sparsepush.ConfigError, match="at least one per node"):
        sparsepush.train(eval_split=True, nodes=4, eval_samples=3)


def test_unknown_keyword_is_a_type_error_naming_it():
    with pytest.raises(TypeError, match=r"unexpected keyword argument 'eval_sample'.*did you mean 'eval_samples'"):
        sparsepush.train(eval_sample=100)
    with pytest.raises(TypeError, match="'frobnicate'"):
        sparsepush.RunSpec(frobnicate=1)
    with pytest.raises(TypeError, match="nodes= takes a bool, int, float or str"):
        sparsepush.train(nodes={4})
    with pytest.raises(TypeError, match="eta= takes one value"):
        sparsepush.RunSpec(eta=[0.1])


def test_bad_value_is_the_library_error_naming_the_option():
    for options, message in [(dict(eval_samples="many"), "--eval-samples: 'many' is not a whole number"),
                             (dict(nodes=4.0), "--nodes: '4.0' is not a whole number"),
                             (dict(eval_samples=0), r"--eval-samples: must be in \[1, 10000\], got 0"),
                             (dict(eta=1.5), r"--eta: must be in \(0, 1\], got 1.5"),
                             (dict(epochs=float("inf")), "--epochs: must be a finite number.*got 'inf'"),
                             (dict(algorithm="sgd"), "--algorithm: sgd not in"),
                             (dict(nesterov="maybe"), "--nesterov: 'maybe' is not true or false"),
                             (dict(algorithm="sgp", compressor="top-k:0.1"), "--compressor: --algorithm sgp")]:
        with pytest.raises(sparsepush.ConfigError, match=message):
            sparsepush.train(**options)
        assert issubclass(sparsepush.ConfigError, ValueError)


def test_mpi_transport_is_refused():
    with pytest.raises(sparsepush.ConfigError, match="--transport mpi: sparsepush.train"):
        sparsepush.train(transport="mpi", nodes=4)


def test_loss_recovery_without_loss_warns(tmp_path):
    # the warning comes from validate(), before the data is loaded (here: a directory that has none)
    with pytest.warns(UserWarning, match="--loss-recovery acts on lost messages only"):
        with pytest.raises(sparsepush.DataError, match="does not exist"):
            sparsepush.train(loss_recovery="ack", data=str(tmp_path / "none"))
    assert sparsepush.RunSpec(loss_recovery="none").validate() == [
        "--loss-recovery acts on lost messages only; with no --drop-probability it changes nothing (the summary lists "
        "it as null)"]


def test_run_options_lists_every_keyword_with_help_and_default():
    opts = sparsepush.run_options()
    assert list(opts) == list(sparsepush.RunSpec().as_dict())
    e = opts["eval_samples"]
    assert e["option"] == "--eval-samples" and e["type"] == "int" and e["default"] == 2000 and e["default_text"] == "2000"
    assert "test images" in e["help"] and e["role"] == "numbers"
    assert opts["algorithm"]["choices"] == ["sp", "scsp", "sgp", "dpsgd", "deepsqueeze", "choco", "choco-push",
                                              "centralized"]
    assert opts["compressor"]["default"] is None and opts["compressor"]["default_text"] == "top-k:0.01"
    assert opts["nesterov"]["type"] == "bool" and opts["nesterov"]["default"] is False
    assert opts["straggler"]["type"] == "list" and opts["lr"]["type"] == "float" and opts["lr"]["default"] == 0.02
    assert opts["threads"]["role"] == "local" and opts["transport"]["role"] == "ranks"
    assert all(o["help"] for o in opts.values())


def test_run_spec_values():
    s = sparsepush.RunSpec(nodes=16, lr=0.1 + 0.2, straggler=["3:2", "5-6:3"], nesterov=True, seed=2**64 - 1)
    assert s["lr"] == 0.1 + 0.2  # repr(): the same bits
    assert s["straggler"] == ["3:2", "5-6:3"] and s["nesterov"] is True and s["seed"] == 2**64 - 1
    assert s["eta"] is None and s.eta_value == 0.02 == sparsepush.default_eta("top-k:0.01")
    assert s.compressor_spec == "top-k:0.01" and s.schedule_spec == "time-varying-ring" and s.final_eta_value == 1.0
    assert sparsepush.RunSpec(algorithm="dpsgd").schedule_spec == "undirected-ring"
    assert sparsepush.RunSpec(algorithm="sp").final_eta_value is None
    assert sparsepush.default_eta(sparsepush.parse_compressor("qsgd:16")) == 0.2
    s.set(lr=None, straggler=None)  # None: the default
    assert s["lr"] == 0.02 and s["straggler"] == []
    assert repr(s) == f"sparsepush.RunSpec(seed={2**64 - 1}, nesterov=True)"
    assert s.validate() == []


def test_lr_schedule():
    s = sparsepush.RunSpec(lr=0.1, warmup=4)
    assert s.lr(0, 100) == pytest.approx(0.01) and s.lr(2, 100) == pytest.approx(0.055)
    assert s.lr(50, 100) == 0.1 and s.lr(75, 100) == pytest.approx(0.01)
    assert sparsepush.RunSpec(lr=0.1, lr_schedule="constant").lr(99, 100) == 0.1


def test_plan_matches_the_parts():
    labels = np.repeat(np.arange(10, dtype=np.uint8), 100)
    spec = sparsepush.RunSpec(nodes=4, epochs=1, batch=10, seed=5)
    p = spec.plan(labels)
    assert p.per_node == 250 and p.train_rounds == 25
    parts = sparsepush.partition(labels, 4, skew=0.8, seed=5)
    assert all(np.array_equal(a, b) for a, b in zip(p.parts, parts))
    sched = sparsepush.parse_schedule(spec.schedule_spec, 4, seed=5)
    rounds, bound, exact = sparsepush.final_rounds_for(sched, 25, 1e-3, eta=spec.final_eta_value)
    assert p.final_rounds == rounds and p.rounds == 25 + rounds and p.final_rounds_bound == bound
    assert p.final_rounds_exact == exact
    assert sparsepush.RunSpec(nodes=4, epochs=1, batch=10, final_rounds=3).plan(labels).final_rounds_bound is None
    with pytest.raises(sparsepush.ConfigError, match="--warmup 30 is longer than the 25 training rounds"):
        sparsepush.RunSpec(nodes=4, epochs=1, batch=10, warmup=30).plan(labels)


def test_shard_sampler_order():
    samples = np.arange(100, 137, dtype=np.uint32)
    a, b = sparsepush.ShardSampler(samples, sparsepush.shard_seed(1, 3)), sparsepush.ShardSampler(samples, 1000006)
    assert sparsepush.shard_seed(1, 3) == 1000006
    first = np.concatenate([a.next_batch(10) for _ in range(4)])  # 40 of 37: into the second epoch
    assert np.array_equal(first, np.concatenate([b.next_batch(20), b.next_batch(20)]))
    assert sorted(first[:37]) == list(samples) and a.epoch == 2 and a.cursor == 3
    assert first.dtype == np.uint32


def test_init_model():
    x = sparsepush.init_model("cnn", 7)
    assert x.dtype == np.float32 and x.shape == (20586,)
    assert np.array_equal(x, sparsepush.init_model("cnn", 7)) and not np.array_equal(x, sparsepush.init_model("cnn", 8))
    assert x[144:160].tolist() == [0.0] * 16  # the first convolution's biases, after its 16 x 9 weights
    with pytest.raises(sparsepush.ConfigError):
        sparsepush.init_model("resnet", 1)
