"""The plan cache: hits and misses, keys that separate dtypes, shapes,
devices and clients, one build per key under concurrent misses, least
recently used eviction."""
import threading
import time

import pytest

import kfuse
from kfuse.plan_cache import PlanCache, chain_fingerprint, client_key, make_key


def _chain(dtype="f32", n=8):
    c = kfuse.Chain()
    x = c.input("x", dtype, [n])
    c.output("y", kfuse.silu(x) * 2.0)
    return c


def test_hit_after_put_and_counts():
    cache = PlanCache()
    key = make_key("fp", [("f32", (4, 8))], 0)
    assert cache.get(key) is None
    cache.put(key, "plan")
    assert cache.get(key) == "plan" and cache.get(key) == "plan"
    assert (cache.hits, cache.misses) == (2, 1)
    assert key in cache and len(cache) == 1


def test_key_separates_dtype_shape_device_and_fingerprint():
    base = make_key("fp", [("bf16", (4, 8)), ("f32", (8,))], 0)
    others = [
        make_key("fp", [("f16", (4, 8)), ("f32", (8,))], 0),
        make_key("fp", [("bf16", (4, 9)), ("f32", (8,))], 0),
        make_key("fp", [("bf16", (4, 8, 1)), ("f32", (8,))], 0),
        make_key("fp", [("bf16", (4, 8))], 0),
        make_key("fp", [("bf16", (4, 8)), ("f32", (8,))], 1),
        make_key("fp", [("bf16", (4, 8)), ("f32", (8,))], -1),
        make_key("fp2", [("bf16", (4, 8)), ("f32", (8,))], 0),
    ]
    cache = PlanCache()
    cache.put(base, "p")
    assert len({base, *others}) == len(others) + 1
    assert all(cache.get(k) is None for k in others)
    assert cache.get(make_key("fp", [("bf16", [4, 8]), ("f32", [8])], 0)) == "p"


def test_client_key_separates_servers_and_pinned_keys():
    key = "ab" * 32
    a = kfuse.Client("127.0.0.1:1")
    assert client_key(a) == client_key(kfuse.Client("127.0.0.1:1", token="t"))
    assert client_key(a) != client_key(kfuse.Client("127.0.0.1:2"))
    assert client_key(a) != client_key(kfuse.Client("127.0.0.1:1", verify_key=key))
    assert (client_key(kfuse.Client("127.0.0.1:1", verify_key=key))
            == client_key(kfuse.Client("127.0.0.1:1", verify_key=key)))

    class Anonymous:  # A client double without an address: itself.
        pass

    one, two = Anonymous(), Anonymous()
    assert client_key(one) == client_key(one) != client_key(two)


def test_make_key_refuses_a_non_int_device():
    with pytest.raises(TypeError, match="device"):
        make_key("fp", [], "cuda:0")


def test_chain_fingerprint_is_stable_and_separates_chains():
    assert chain_fingerprint(_chain()) == chain_fingerprint(_chain())
    assert chain_fingerprint(_chain()) == chain_fingerprint(_chain().to_proto())
    assert chain_fingerprint(_chain()) != chain_fingerprint(_chain("bf16"))
    assert chain_fingerprint(_chain()) != chain_fingerprint(_chain(n=9))


def test_get_or_create_builds_once_and_retries_after_a_failure():
    cache = PlanCache()
    calls = []

    def bad():
        calls.append("bad")
        raise RuntimeError("compile failed")

    with pytest.raises(RuntimeError):
        cache.get_or_create("k", bad)
    assert "k" not in cache
    assert cache.get_or_create("k", lambda: calls.append("good") or "plan") == "plan"
    assert cache.get_or_create("k", lambda: calls.append("again") or "other") == "plan"
    assert calls == ["bad", "good"]


def test_concurrent_misses_build_once():
    cache = PlanCache()
    builds = []
    start = threading.Barrier(16)

    def build():
        builds.append(1)
        time.sleep(0.05)  # Long enough for every thread to miss.
        return "plan"

    results = []

    def worker():
        start.wait()
        results.append(cache.get_or_create("k", build))

    threads = [threading.Thread(target=worker) for _ in range(16)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert results == ["plan"] * 16 and len(builds) == 1


def test_threads_hammering_distinct_keys():
    cache = PlanCache()
    errors = []

    def worker(i):
        try:
            for j in range(200):
                key = make_key("fp", [("f32", (i, j % 10))], 0)
                got = cache.get_or_create(key, lambda: (i, j % 10))
                if got != (i, j % 10):
                    errors.append((i, j, got))
        except Exception as e:  # noqa: BLE001 (reported below)
            errors.append(e)

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    assert len(cache) == 80
    assert cache.misses == 80 and cache.hits == 8 * 200 - 80


def test_eviction_is_least_recently_used_first_and_invalidate():
    cache = PlanCache(max_entries=2)
    for k in "abc":
        cache.put(k, k.upper())
    assert "a" not in cache and cache.peek("b") == "B" and cache.peek("c") == "C"
    assert cache.get("b") == "B"  # Used: c is now the least recently used ...
    cache.put("d", "D")
    assert "c" not in cache and cache.peek("b") == "B" and cache.peek("d") == "D"
    cache.peek("d")  # ... and peeking does not count as a use.
    cache.put("e", "E")
    assert "b" not in cache and "d" in cache
    cache.put("d", "D2")  # A put is a use too.
    cache.put("f", "F")
    assert "e" not in cache and cache.peek("d") == "D2"
    assert cache.invalidate("d") and not cache.invalidate("d")
    with pytest.raises(ValueError):
        cache.put("d", None)
    with pytest.raises(ValueError):
        PlanCache(max_entries=0)
