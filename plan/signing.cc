#include "plan/signing.h"

#include <fcntl.h>
#include <sodium.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "core/proto_bytes.h"

namespace kfuse {
namespace {

// sodium_init is thread safe and idempotent; once is enough.
void InitSodium() {
  static const int r = sodium_init();
  (void)r;
}

std::string Sha256Hex(const std::string& bytes) {
  unsigned char h[crypto_hash_sha256_BYTES];
  crypto_hash_sha256(h, reinterpret_cast<const unsigned char*>(bytes.data()), bytes.size());
  return absl::BytesToHexString(absl::string_view(reinterpret_cast<const char*>(h), sizeof(h)));
}

// "<name> <length>:<bytes>\n": unambiguous whatever the bytes hold.
void AddString(std::string& out, absl::string_view name, absl::string_view value) {
  absl::StrAppend(&out, name, " ", value.size(), ":", value, "\n");
}

}  // namespace

std::string PublicKey::Hex() const {
  return absl::BytesToHexString(absl::string_view(reinterpret_cast<const char*>(bytes.data()), bytes.size()));
}

SigningKey SigningKeyFromSeed(const std::array<uint8_t, 32>& seed) {
  InitSodium();
  SigningKey k;
  k.seed = seed;
  crypto_sign_seed_keypair(k.public_key.bytes.data(), k.secret.data(), seed.data());
  return k;
}

SigningKey GenerateSigningKey() {
  InitSodium();
  std::array<uint8_t, 32> seed;
  randombytes_buf(seed.data(), seed.size());
  SigningKey k = SigningKeyFromSeed(seed);
  sodium_memzero(seed.data(), seed.size());
  return k;
}

absl::StatusOr<SigningKey> LoadOrCreateSigningKey(const std::string& path, bool create, bool* created) {
  if (created != nullptr) *created = false;
  int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0 && errno == ENOENT && create) {
    SigningKey k = GenerateSigningKey();
    // Written beside, then renamed into place: a failed write never leaves
    // a partial key that every later start would refuse.
    const std::string tmp = absl::StrCat(path, ".tmp-", getpid());
    int wfd = open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (wfd < 0) {
      return absl::PermissionDeniedError(absl::StrCat("cannot create signing key ", path, ": ", strerror(errno),
                                                      " (pass --signing_key FILE)"));
    }
    std::string hex = absl::StrCat(
        absl::BytesToHexString(absl::string_view(reinterpret_cast<const char*>(k.seed.data()), 32)), "\n");
    bool ok = write(wfd, hex.data(), hex.size()) == static_cast<ssize_t>(hex.size()) && fsync(wfd) == 0;
    sodium_memzero(hex.data(), hex.size());
    ok = close(wfd) == 0 && ok;
    // link() fails if another process created the key meanwhile: use theirs.
    if (ok && link(tmp.c_str(), path.c_str()) != 0) {
      unlink(tmp.c_str());
      if (errno == EEXIST) return LoadOrCreateSigningKey(path, false);
      return absl::InternalError(absl::StrCat("cannot write signing key ", path, ": ", strerror(errno)));
    }
    unlink(tmp.c_str());
    if (!ok) return absl::InternalError(absl::StrCat("cannot write signing key ", path));
    if (created != nullptr) *created = true;
    return k;
  }
  if (fd < 0) {
    return absl::NotFoundError(absl::StrCat("cannot open signing key ", path, ": ", strerror(errno)));
  }
  struct stat st;
  if (fstat(fd, &st) != 0 || (st.st_mode & 077) != 0) {
    close(fd);
    return absl::PermissionDeniedError(
        absl::StrCat("signing key ", path, " is readable by group or others; chmod 600 it"));
  }
  char buf[130] = {0};
  ssize_t n = read(fd, buf, sizeof(buf) - 1);
  close(fd);
  std::string text(buf, n > 0 ? static_cast<size_t>(n) : 0);
  sodium_memzero(buf, sizeof(buf));
  absl::string_view hex = absl::StripAsciiWhitespace(text);
  std::array<uint8_t, 32> seed{};
  if (hex.size() != 64 || sodium_hex2bin(seed.data(), seed.size(), hex.data(), hex.size(), nullptr, nullptr,
                                         nullptr) != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("signing key ", path, ": expected 64 hex digits (an Ed25519 seed)"));
  }
  sodium_memzero(text.data(), text.size());
  SigningKey k = SigningKeyFromSeed(seed);
  sodium_memzero(seed.data(), seed.size());
  return k;
}

absl::StatusOr<PublicKey> ParsePublicKeyHex(const std::string& hex) {
  InitSodium();
  PublicKey k;
  absl::string_view h = absl::StripAsciiWhitespace(hex);
  if (h.size() != 64 ||
      sodium_hex2bin(k.bytes.data(), k.bytes.size(), h.data(), h.size(), nullptr, nullptr, nullptr) != 0) {
    return absl::InvalidArgumentError("a public key is 64 hex digits (Ed25519, as kfused --print_public_key prints)");
  }
  return k;
}

std::string PlanSigningPayload(const v1::KernelPlan& plan) {
  std::string out = "kfuse.v1 plan signature\n";
  AddString(out, "key", plan.key());
  absl::StrAppend(&out, "kernels ", plan.kernels_size(), "\n");
  for (const v1::Kernel& k : plan.kernels()) {
    AddString(out, "entry", k.entry());
    AddString(out, "arch", k.arch());
    absl::StrAppend(&out, "cubin ", Sha256Hex(k.cubin()), "\n");
    absl::StrAppend(&out, "ptx ", Sha256Hex(k.ptx()), "\n");
    v1::Kernel launch;
    *launch.mutable_params() = k.params();
    if (k.has_grid()) *launch.mutable_grid() = k.grid();
    if (k.has_block()) *launch.mutable_block() = k.block();
    launch.set_dynamic_smem_bytes(k.dynamic_smem_bytes());
    if (k.has_cluster()) *launch.mutable_cluster() = k.cluster();
    *launch.mutable_preconditions() = k.preconditions();
    absl::StrAppend(&out, "launch ", Sha256Hex(DeterministicBytes(launch)), "\n");
  }
  v1::KernelPlan shape;
  *shape.mutable_symbols() = plan.symbols();
  *shape.mutable_intermediates() = plan.intermediates();
  *shape.mutable_inputs() = plan.inputs();
  *shape.mutable_outputs() = plan.outputs();
  absl::StrAppend(&out, "plan ", Sha256Hex(DeterministicBytes(shape)), "\n");
  return out;
}

void SignPlan(const SigningKey& key, v1::KernelPlan* plan) {
  InitSodium();
  std::string payload = PlanSigningPayload(*plan);
  std::string sig(crypto_sign_BYTES, '\0');
  crypto_sign_detached(reinterpret_cast<unsigned char*>(sig.data()), nullptr,
                       reinterpret_cast<const unsigned char*>(payload.data()), payload.size(), key.secret.data());
  plan->set_signature(std::move(sig));
}

absl::Status VerifyPlanSignature(const v1::KernelPlan& plan, const PublicKey& pinned) {
  InitSodium();
  if (plan.signature().empty()) {
    return absl::PermissionDeniedError("plan is unsigned (the server has no signing key, or is not kfused)");
  }
  std::string payload = PlanSigningPayload(plan);
  if (plan.signature().size() != crypto_sign_BYTES ||
      crypto_sign_verify_detached(reinterpret_cast<const unsigned char*>(plan.signature().data()),
                                  reinterpret_cast<const unsigned char*>(payload.data()), payload.size(),
                                  pinned.bytes.data()) != 0) {
    // Pinning the signing key file (the seed) instead of the public key is an
    // easy slip, as both are 64 hex digits: say so, and never echo the pinned
    // bytes, which would print part of a secret to a terminal or a log.
    unsigned char derived[crypto_sign_PUBLICKEYBYTES], secret[crypto_sign_SECRETKEYBYTES];
    crypto_sign_seed_keypair(derived, secret, pinned.bytes.data());
    sodium_memzero(secret, sizeof(secret));
    const bool pinned_seed = plan.signature().size() == crypto_sign_BYTES &&
                             crypto_sign_verify_detached(reinterpret_cast<const unsigned char*>(plan.signature().data()),
                                                         reinterpret_cast<const unsigned char*>(payload.data()),
                                                         payload.size(), derived) == 0;
    if (pinned_seed) {
      return absl::PermissionDeniedError(
          "the pinned key is the server's private signing key, not its public key: pin what "
          "`kfused --print_public_key` prints, and keep the signing key file secret");
    }
    return absl::PermissionDeniedError(
        "plan signature does not verify against the pinned key (compare it with `kfused --print_public_key`)");
  }
  return absl::OkStatus();
}

namespace {

// The payload with `blob_hash` as the blob's hash (the bytes' own, or the
// hash the entry claims for them).
std::string PayloadWithBlobHash(const v1::StoreEntry& e, absl::string_view blob_hash) {
  std::string out = "kfuse.v1 store entry signature\n";
  AddString(out, "kind", e.kind());
  AddString(out, "key", e.key());
  AddString(out, "chain", e.chain());
  AddString(out, "spec", e.spec());
  AddString(out, "device", e.device());
  AddString(out, "toolchain", e.toolchain());
  AddString(out, "generator", e.generator());
  AddString(out, "family", e.family());
  AddString(out, "arch", e.arch());
  AddString(out, "device_name", e.device_name());
  AddString(out, "state", e.state());
  AddString(out, "description", e.description());
  absl::StrAppend(&out, "blob ", blob_hash, "\n");
  AddString(out, "blob_sha256", e.blob_sha256());
  AddString(out, "node", e.node());
  absl::StrAppend(&out, "created_unix_ms ", e.created_unix_ms(), "\n");
  AddString(out, "kfuse_version", e.kfuse_version());
  AddString(out, "signer", e.signer());
  return out;
}

bool SignatureVerifies(const v1::StoreEntry& e, const std::string& payload, const PublicKey& signer) {
  return e.signature().size() == crypto_sign_BYTES &&
         crypto_sign_verify_detached(reinterpret_cast<const unsigned char*>(e.signature().data()),
                                     reinterpret_cast<const unsigned char*>(payload.data()), payload.size(),
                                     signer.bytes.data()) == 0;
}

}  // namespace

std::string StoreEntrySigningPayload(const v1::StoreEntry& e) { return PayloadWithBlobHash(e, Sha256Hex(e.blob())); }

void SignStoreEntry(const SigningKey& key, v1::StoreEntry* entry) {
  InitSodium();
  entry->set_signer(std::string(reinterpret_cast<const char*>(key.public_key.bytes.data()),
                                key.public_key.bytes.size()));
  std::string payload = StoreEntrySigningPayload(*entry);
  std::string sig(crypto_sign_BYTES, '\0');
  crypto_sign_detached(reinterpret_cast<unsigned char*>(sig.data()), nullptr,
                       reinterpret_cast<const unsigned char*>(payload.data()), payload.size(), key.secret.data());
  entry->set_signature(std::move(sig));
}

absl::StatusOr<TrustedKeys> TrustedKeys::Parse(const std::string& text) {
  TrustedKeys t;
  int line_no = 0;
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    ++line_no;
    line = absl::StripAsciiWhitespace(line.substr(0, line.find('#')));
    if (line.empty()) continue;
    absl::StatusOr<PublicKey> k = ParsePublicKeyHex(std::string(line));
    if (!k.ok()) return absl::InvalidArgumentError(absl::StrCat("trusted keys, line ", line_no, ": ", k.status().message()));
    t.Add(*k);
  }
  return t;
}

absl::StatusOr<TrustedKeys> TrustedKeys::Load(const std::string& path) {
  // An ifstream opens a directory and reads it as empty: no keys, silently.
  if (std::error_code ec; std::filesystem::is_directory(path, ec)) {
    return absl::InvalidArgumentError(absl::StrCat("trusted keys file ", path, " is a directory"));
  }
  std::ifstream in(path);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot read trusted keys file ", path));
  std::stringstream text;
  text << in.rdbuf();
  absl::StatusOr<TrustedKeys> t = Parse(text.str());
  if (!t.ok()) return absl::InvalidArgumentError(absl::StrCat(path, ": ", t.status().message()));
  return t;
}

void TrustedKeys::Add(const PublicKey& key) {
  if (!Contains(key)) keys_.push_back(key);
}

bool TrustedKeys::Contains(const PublicKey& key) const {
  for (const PublicKey& k : keys_) {
    if (k == key) return true;
  }
  return false;
}

absl::Status VerifyStoreEntry(const v1::StoreEntry& e, const TrustedKeys& trusted) {
  InitSodium();
  const std::string name = absl::StrCat(e.kind(), " ", e.key().substr(0, 16));
  PublicKey signer;
  if (e.signer().empty()) return absl::PermissionDeniedError(absl::StrCat(name, ": unsigned entry"));
  if (e.signer().size() != signer.bytes.size()) {
    return absl::PermissionDeniedError(absl::StrCat(name, ": signer is ", e.signer().size(),
                                                    " bytes; a public key is ", signer.bytes.size()));
  }
  std::copy(e.signer().begin(), e.signer().end(), signer.bytes.begin());
  if (!trusted.Contains(signer)) {
    return absl::PermissionDeniedError(
        absl::StrCat(name, ": signed by ", signer.Hex().substr(0, 16), "..., which is not a trusted key"));
  }
  const std::string blob_hash = Sha256Hex(e.blob());
  if (SignatureVerifies(e, PayloadWithBlobHash(e, blob_hash), signer)) {
    if (blob_hash != e.blob_sha256()) {
      return absl::DataLossError(absl::StrCat(name, ": blob does not match its sha256"));
    }
    return absl::OkStatus();
  }
  // The signer signed the hash the entry claims, but the bytes are others:
  // they changed after signing (damage at rest, or rewritten where no hash
  // check guards them), which the signer is not to blame for.
  if (blob_hash != e.blob_sha256() && SignatureVerifies(e, PayloadWithBlobHash(e, e.blob_sha256()), signer)) {
    return absl::DataLossError(absl::StrCat(name, ": blob is not the bytes signed (changed since)"));
  }
  return absl::PermissionDeniedError(absl::StrCat(name, ": signature does not verify"));
}

}  // namespace kfuse
