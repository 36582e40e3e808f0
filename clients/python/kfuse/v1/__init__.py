"""kfuse.v1 wire types: kfuse_pb2 and kfuse_pb2_grpc, generated at build time."""
