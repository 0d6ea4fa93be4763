"""The bytes a proof adds to a stored envelope, as `python -m bench.sizing --proofs` reports them."""

from __future__ import annotations

from bench import sizing

# `,"sig":"` and `"`, around an Ed25519 signature in base64 (88 characters).
SIGNATURE = 8 + 88 + 1
# `"` + 64 hex digits + `",`: what each hash of an inclusion path adds, but the last one's comma.
PATH_HASH = 67


def test_a_proof_grows_by_one_hash_each_time_its_batch_doubles() -> None:
    added = sizing.proof_bytes()
    assert added["signed_alone"] == SIGNATURE
    batches = added["proof_by_batch_size"]
    assert list(batches) == [str(size) for size in sizing.BATCHES]
    # 1 -> 4 leaves adds two hashes (the first without its comma); from 4 to 64, two more every time
    # the batch is 4 times larger, plus a digit of the index and the size where they grow a digit.
    assert batches["4"] - batches["1"] == 2 * PATH_HASH - 1
    assert 2 * PATH_HASH <= batches["16"] - batches["4"] <= 2 * PATH_HASH + 2
    assert 2 * PATH_HASH <= batches["64"] - batches["16"] <= 2 * PATH_HASH + 2
    for size, more in added["proof_minus_signature_by_batch_size"].items():
        assert more == batches[size] - SIGNATURE
