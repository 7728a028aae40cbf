# The launcher's word as the library reads it (sparsepush.launched(), launcher_environment(): the
# one list of the variables mpirun, mpiexec and torchrun set), sparsepush.torch.launch_info() built
# on it, and the MPI timeout's default named once (sparsepush.default_mpi_timeout).
import pytest

import sparsepush


@pytest.fixture
def no_launcher(monkeypatch):
    """An environment no launcher set: every variable of launcher_environment() removed."""
    for entry in sparsepush.launcher_environment():
        for key in ("size", "rank", "marker"):
            if entry[key]:
                monkeypatch.delenv(entry[key], raising=False)
    return monkeypatch


def test_the_list_names_mpirun_and_torchrun():
    table = sparsepush.launcher_environment()
    kinds = {(e["kind"], e["size"], e["rank"]) for e in table}
    assert ("mpi", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_RANK") in kinds
    assert ("mpi", "PMI_SIZE", "PMI_RANK") in kinds
    assert ("torch", "WORLD_SIZE", "RANK") in kinds
    assert all(e["launcher"] for e in table)


def test_no_launcher_is_none(no_launcher):
    assert sparsepush.launched() is None


@pytest.mark.parametrize("env,expected", [
    ({"OMPI_COMM_WORLD_SIZE": "4", "OMPI_COMM_WORLD_RANK": "2"}, {"kind": "mpi", "ranks": 4, "rank": 2}),
    ({"PMI_SIZE": "3", "PMI_RANK": "1"}, {"kind": "mpi", "ranks": 3, "rank": 1}),
    ({"PMI_SIZE": "3"}, {"kind": "mpi", "ranks": 3, "rank": 0}),
    ({"TORCHELASTIC_RUN_ID": "x", "WORLD_SIZE": "2", "RANK": "1"}, {"kind": "torch", "ranks": 2, "rank": 1}),
    ({"WORLD_SIZE": "2", "RANK": "1"}, None),  # WORLD_SIZE alone: no launcher said it
    ({"OMPI_COMM_WORLD_SIZE": "0"}, None),
    ({"OMPI_COMM_WORLD_SIZE": "four"}, None),
])
def test_a_launcher_is_read_from_its_variables(no_launcher, env, expected):
    for k, v in env.items():
        no_launcher.setenv(k, v)
    assert sparsepush.launched() == expected


def test_launch_info_is_the_librarys_word(no_launcher):
    spt = pytest.importorskip("sparsepush.torch")
    assert spt.launch_info() is None
    no_launcher.setenv("OMPI_COMM_WORLD_SIZE", "5")
    no_launcher.setenv("OMPI_COMM_WORLD_RANK", "3")
    assert spt.launch_info() == {"kind": "mpi", "nodes": 5, "rank": 3}


def test_the_mpi_timeout_default_is_the_librarys():
    assert sparsepush.default_mpi_timeout == 60.0
    if sparsepush.has_train:
        assert sparsepush.RunSpec()["mpi_timeout"] == sparsepush.default_mpi_timeout


@pytest.mark.skipif(not sparsepush.has_train, reason="needs the reference backend (RunSpec)")
def test_the_fingerprint_leaves_local_settings_out():
    a, b = sparsepush.RunSpec(threads=1), sparsepush.RunSpec(threads=2)
    assert repr(a) != repr(b)
    assert a.fingerprint(10) == b.fingerprint(10) and a.fingerprint(10, every_rank=True) == b.fingerprint(10, every_rank=True)
    c = sparsepush.RunSpec(compressor="top-k:0.5")
    assert "top-k:0.5" in sparsepush.settings_diff(a.fingerprint(10), c.fingerprint(10))
    assert sparsepush.settings_diff(a.fingerprint(10), b.fingerprint(10)) == ""
