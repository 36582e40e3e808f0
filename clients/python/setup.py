"""Generates the gRPC stubs from ../../proto at build time (build_py).

The generated modules land in the wheel as kfuse/v1/kfuse_pb2.py and
kfuse/v1/kfuse_pb2_grpc.py, matching the proto's own path, so the stubs'
`from kfuse.v1 import kfuse_pb2` resolves inside this package. KFUSE_PROTO_DIR
overrides where the .proto tree is (for builds outside the repository).
"""
import os
import re
import shutil
import tempfile

from setuptools import setup
from setuptools.command.build_py import build_py

HERE = os.path.dirname(os.path.abspath(__file__))
PROTO_DIR = os.environ.get("KFUSE_PROTO_DIR", os.path.join(HERE, "..", "..", "proto"))
PROTO = "kfuse/v1/kfuse.proto"
# The protobuf runtime on the GPU machine: generated code must not require a
# newer one (protobuf's gencode checks runtime >= gencode at import).
GPU_MACHINE_PROTOBUF = (7, 36)


def generate(out_dir):
    from grpc_tools import protoc  # Build requirement; see pyproject.toml.

    proto_path = os.path.join(PROTO_DIR, PROTO)
    if not os.path.exists(proto_path):
        raise SystemExit(f"kfuse: {proto_path} not found; set KFUSE_PROTO_DIR")
    tools_include = os.path.join(os.path.dirname(protoc.__file__), "_proto")
    with tempfile.TemporaryDirectory() as tmp:
        rc = protoc.main(["grpc_tools.protoc", f"-I{PROTO_DIR}", f"-I{tools_include}",
                          f"--python_out={tmp}", f"--pyi_out={tmp}",
                          f"--grpc_python_out={tmp}", proto_path])
        if rc != 0:
            raise SystemExit(f"kfuse: grpc_tools.protoc failed ({rc}) on {proto_path}")
        gen = os.path.join(tmp, "kfuse", "v1")
        with open(os.path.join(gen, "kfuse_pb2.py")) as f:
            m = re.search(r"Protobuf Python Version: (\d+)\.(\d+)", f.read())
        if not m or (int(m.group(1)), int(m.group(2))) > GPU_MACHINE_PROTOBUF or \
                int(m.group(1)) != GPU_MACHINE_PROTOBUF[0]:
            raise SystemExit(f"kfuse: protobuf gencode {m and m.group(0)} does not pair with "
                             f"the GPU machine's runtime {GPU_MACHINE_PROTOBUF}")
        dest = os.path.join(out_dir, "kfuse", "v1")
        os.makedirs(dest, exist_ok=True)
        for name in ("kfuse_pb2.py", "kfuse_pb2.pyi", "kfuse_pb2_grpc.py"):
            shutil.copy(os.path.join(gen, name), os.path.join(dest, name))


class BuildPyWithStubs(build_py):
    def run(self):
        super().run()
        generate(self.build_lib)


setup(cmdclass={"build_py": BuildPyWithStubs})
