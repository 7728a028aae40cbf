# Buffers of the wrong kind are a ValueError that says what was expected; nothing is taken.
import numpy as np
import pytest

import sparsepush


EXPECTED = "C-contiguous float32 or float64 CPU buffer"


@pytest.mark.parametrize("bad, why", [
    (np.zeros(10)[::2], "non-contiguous"),
    (np.zeros((4, 5), order="F"), "non-contiguous"),
    (np.zeros(10, dtype=np.int32), "format"),
    (np.zeros(10, dtype=np.float16), "format"),
    (np.zeros(10, dtype=np.complex128), "format"),
    (np.zeros(0), "empty"),
    ([1.0, 2.0], "neither the buffer protocol nor DLPack"),
    (None, "None"),
])
def test_bad_x_is_a_value_error(bad, why):
    with pytest.raises(ValueError) as e:
        sparsepush.PushSumNode(bad, 0)
    assert EXPECTED in str(e.value) and why in str(e.value)


def test_read_only_x_is_refused():
    a = np.zeros(10)
    a.setflags(write=False)
    with pytest.raises(ValueError, match="read-only"):
        sparsepush.PushSumNode(a, 0)


class FakeGpuTensor:
    """Says it lives on a CUDA device, as a torch GPU tensor's DLPack export does."""

    def __dlpack_device__(self):
        return (2, 0)  # kDLCUDA

    def __dlpack__(self, stream=None):
        raise AssertionError("must be refused before its memory is asked for")


def test_gpu_tensor_is_refused():
    with pytest.raises(ValueError, match="GPU tensor"):
        sparsepush.PushSumNode(FakeGpuTensor(), 0)


def test_torch_refusals():
    torch = pytest.importorskip("torch")
    with pytest.raises(ValueError, match="non-contiguous"):
        sparsepush.PushSumNode(torch.zeros(4, 6).t(), 0)
    with pytest.raises(ValueError, match="type code"):
        sparsepush.PushSumNode(torch.zeros(6, dtype=torch.int64), 0)
    with pytest.raises(ValueError, match="requires grad"):
        sparsepush.PushSumNode(torch.zeros(6, requires_grad=True), 0)
    if hasattr(torch, "device") and "meta" in str(torch.empty(1, device="meta").device):
        with pytest.raises(ValueError):
            sparsepush.PushSumNode(torch.empty(6, device="meta"), 0)


def test_direction_of_another_dtype_is_refused_and_nothing_changes():
    x = np.arange(1.0, 11.0)
    x0 = x.copy()
    nd = sparsepush.PushSumNode(x, 0)
    net = sparsepush.LoopbackNetwork(2)
    with pytest.raises(ValueError, match="float32 where the node holds float64"):
        nd.round(0, sparsepush.parse_schedule("complete", 2), sparsepush.parse_compressor("identity"), net.endpoint(0),
                 direction=np.ones(10, dtype=np.float32), gamma=0.1)
    np.testing.assert_array_equal(x, x0)
    assert nd.weight == 1.0


def test_group_refuses_mixed_dtypes():
    with pytest.raises(ValueError, match="one dtype"):
        sparsepush.PushSumGroup([np.zeros(4), np.zeros(4, dtype=np.float32)])


def test_decode_refuses_non_bytes():
    with pytest.raises(ValueError):
        sparsepush.decode(np.zeros(4), 4)
