"""Fixtures: a real kfused on loopback (--no_gpu, temp store), started once
per session; tests that need it skip with the reason when the binary is
missing (build it with scripts/setup, or point KFUSED at one)."""
import os
import socket
import subprocess
import time

import pytest

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))
EXAMPLES = os.path.join(REPO, "examples")


def _kfused_path():
    return os.environ.get("KFUSED", os.path.join(REPO, "build", "service", "kfused"))


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="session")
def kfused(tmp_path_factory):
    """(address, public key hex) of a running kfused."""
    binary = _kfused_path()
    if not os.access(binary, os.X_OK):
        pytest.skip(f"kfused not built at {binary} (run scripts/setup, or set KFUSED)")
    store = str(tmp_path_factory.mktemp("kfused") / "store.db")
    key = subprocess.run([binary, "--print_public_key", f"--store={store}"], check=True,
                         capture_output=True, text=True, timeout=30).stdout.strip().split()[-1]
    address = f"127.0.0.1:{_free_port()}"
    log = open(store + ".log", "w")
    proc = subprocess.Popen([binary, f"--address={address}", f"--store={store}", "--no_gpu"],
                            stdout=log, stderr=subprocess.STDOUT)
    import kfuse

    client = kfuse.Client(address, timeout=2, on_unavailable="raise")
    deadline = time.time() + 30
    while True:
        try:
            if client.health() == "SERVING":
                break
        except kfuse.KfuseError:
            pass
        if proc.poll() is not None or time.time() > deadline:
            proc.kill()
            pytest.fail(f"kfused did not start; see {store}.log")
        time.sleep(0.1)
    client.close()
    yield address, key
    proc.terminate()
    try:
        proc.wait(10)
    except subprocess.TimeoutExpired:
        proc.kill()
    log.close()


@pytest.fixture
def client(kfused):
    import kfuse

    with kfuse.Client(kfused[0], timeout=60, on_unavailable="raise") as c:
        yield c


def example(name):
    with open(os.path.join(EXAMPLES, name)) as f:
        return f.read()
