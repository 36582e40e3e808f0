"""A thread-safe cache of compiled plans, so that a warm call makes no RPC.

    cache = PlanCache()
    key = make_key(chain_fingerprint(chain), [("bf16", (4096, 1024))], device=0)
    entry = cache.get_or_create(key, lambda: client.compile(chain).plan)
    cache.get(key)      # the same entry: one dict lookup, no lock

Keys are (fingerprint, ((dtype, shape), ...), device ordinal) tuples; any
hashable key works. get_or_create runs `build` at most once per key at a
time: concurrent misses of one key wait for the first builder instead of
compiling again. A build that raises stores nothing, so the next call
retries. Entries past `max_entries` are evicted least recently used
first: a hit (get) marks its entry used, so hot signatures stay. Reads
take no lock; writes (put, a build, eviction) do.
"""
import collections
import hashlib
import threading

from kfuse.chain import Chain


def chain_fingerprint(chain):
    """sha256 (hex) of a chain's deterministic wire encoding: a Chain
    (builder) or a kfuse.v1.Chain."""
    proto = chain.to_proto() if isinstance(chain, Chain) else chain
    return hashlib.sha256(proto.SerializeToString(deterministic=True)).hexdigest()


def make_key(fingerprint, specs, device):
    """A cache key: `specs` are (dtype, shape) pairs of the inputs (dtype as
    any object with a stable str, e.g. "bf16" or torch.bfloat16); `device`
    an ordinal (-1 for the host)."""
    if not isinstance(device, int) or isinstance(device, bool):
        raise TypeError(f"device must be an int ordinal; got {device!r}")
    return (fingerprint, tuple((str(dt), tuple(int(d) for d in shape)) for dt, shape in specs), device)


def client_key(client):
    """What a key of a cache shared between clients needs of the client that
    compiled a plan: who answered (its address; the object's id for a
    client without one) and the key it pinned, so that a plan one client
    fetched (or verified) is not served to a client of another server or
    pin. Clients of one server and pin share plans."""
    return (type(client).__qualname__, getattr(client, "address", None) or id(client),
            getattr(client, "verify_key", None))


class PlanCache:
    """Key -> entry (a plan, or whatever the caller stores); thread safe."""

    def __init__(self, max_entries=4096):
        if max_entries <= 0:
            raise ValueError("max_entries must be positive")
        self.max_entries = max_entries
        self._lock = threading.Lock()
        self._entries = collections.OrderedDict()  # The least recently used first.
        self._building = {}  # key -> lock held by the one thread building it.
        self.hits = 0
        self.misses = 0

    def get(self, key):
        """The entry, or None (a miss); counted in hits / misses, a hit
        marked most recently used. Takes no lock (each OrderedDict call is
        atomic), so the counts may miss an increment when threads race."""
        entry = self._entries.get(key)
        if entry is None:
            self.misses += 1
            return None
        self.hits += 1
        try:
            self._entries.move_to_end(key)
        except KeyError:  # Evicted by another thread since the read.
            pass
        return entry

    def peek(self, key):
        """As get, without counting or marking the entry used."""
        with self._lock:
            return self._entries.get(key)

    def put(self, key, entry):
        if entry is None:
            raise ValueError("a cache entry cannot be None")
        with self._lock:
            self._entries.pop(key, None)
            self._entries[key] = entry
            while len(self._entries) > self.max_entries:
                self._entries.popitem(last=False)
        return entry

    def get_or_create(self, key, build):
        """The entry for `key`, calling build() (which must not return None)
        on a miss; concurrent misses of one key build once."""
        entry = self.get(key)
        if entry is not None:
            return entry
        with self._lock:
            building = self._building.setdefault(key, threading.Lock())
        try:
            with building:
                entry = self.peek(key)
                if entry is None:
                    entry = self.put(key, build())
        finally:
            with self._lock:
                if self._building.get(key) is building:
                    del self._building[key]
        return entry

    def invalidate(self, key):
        """Drops one entry; True if it was there."""
        with self._lock:
            return self._entries.pop(key, None) is not None

    def clear(self):
        with self._lock:
            self._entries.clear()
            self.hits = self.misses = 0

    def __len__(self):
        with self._lock:
            return len(self._entries)

    def __contains__(self, key):
        with self._lock:
            return key in self._entries


__all__ = ["PlanCache", "make_key", "chain_fingerprint", "client_key"]
