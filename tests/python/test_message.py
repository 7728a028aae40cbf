# compress_with_feedback, encode and decode against independent computations: top-k picks the k
# largest magnitudes (numpy's argsort), q + e' = x + e exactly, and decode(encode(q)) is q.
import numpy as np
import pytest

import sparsepush


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_top_k_with_feedback_against_numpy(dtype, rng):
    d, k = 1000, 37
    x = rng.standard_normal(d).astype(dtype)
    e = (0.1 * rng.standard_normal(d)).astype(dtype)
    v = x + e  # in the buffers' dtype, as the library forms it
    e_addr = e.ctypes.data
    q = sparsepush.compress_with_feedback(sparsepush.parse_compressor(f"top-k:{k}"), x, e, 5, 2, 9)
    assert e.ctypes.data == e_addr  # the residual was updated in place
    assert (q.dim, q.count, q.dense) == (d, k, False)
    want = np.sort(np.argsort(-np.abs(v), kind="stable")[:k])
    np.testing.assert_array_equal(q.indices, want)
    np.testing.assert_array_equal(q.values, v[want].astype(np.float64))  # fp32 wire values: exact for these
    dense = q.to_dense()
    np.testing.assert_array_equal(dense.astype(dtype) + e, v)  # q + e' = v, exactly
    assert np.all(e[want] == 0)


def test_encode_decode_round_trip(rng):
    x = rng.standard_normal(500)
    for spec in ["top-k:0.05", "top-k:0.05+int8", "random-k:0.1", "qsgd:16", "sign", "identity"]:
        q = sparsepush.compress_with_feedback(sparsepush.parse_compressor(spec), x, np.zeros(500), 1, 0, 0)
        b = sparsepush.encode(q)
        assert isinstance(b, bytes) and len(b) == q.wire_bytes
        r = sparsepush.decode(b, 500)
        assert (r.dim, r.count, r.dense) == (q.dim, q.count, q.dense)
        np.testing.assert_array_equal(r.indices, q.indices)
        np.testing.assert_array_equal(r.to_dense(), q.to_dense())
        assert sparsepush.encode(r) == b
        sparsepush.decode(memoryview(bytearray(b)), 500)  # any bytes-like


def test_compression_is_keyed_by_seed_node_and_round(rng):
    x = rng.standard_normal(400)
    comp = sparsepush.parse_compressor("random-k:0.1")

    def idx(seed, node, rnd):
        return sparsepush.compress_with_feedback(comp, x, np.zeros(400), seed, node, rnd).indices

    np.testing.assert_array_equal(idx(1, 2, 3), idx(1, 2, 3))
    assert not np.array_equal(idx(1, 2, 3), idx(1, 2, 4))
    assert not np.array_equal(idx(1, 2, 3), idx(1, 3, 3))
    assert not np.array_equal(idx(1, 2, 3), idx(2, 2, 3))


def test_size_mismatch_is_a_size_error():
    with pytest.raises(sparsepush.SizeError, match="x has 5 elements, the residual 6"):
        sparsepush.compress_with_feedback(sparsepush.parse_compressor("identity"), np.ones(5), np.zeros(6), 0, 0, 0)
    with pytest.raises(ValueError, match="float64 where the node holds float32"):
        sparsepush.compress_with_feedback(sparsepush.parse_compressor("identity"), np.ones(5),
                                          np.zeros(5, dtype=np.float32), 0, 0, 0)
