// The kfuse release, one string for the server, the clients and the repro
// bundles (the wire API's version is "kfuse.v1", apart from this).
#ifndef KFUSE_CORE_VERSION_H_
#define KFUSE_CORE_VERSION_H_

namespace kfuse {

inline constexpr char kKfuseVersion[] = "0.1.0";

}  // namespace kfuse

#endif  // KFUSE_CORE_VERSION_H_
