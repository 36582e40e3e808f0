// Store administration between nodes: Explain (why a request would miss),
// ExportKernels (stored entries, signed by this node, streamed one at a
// time) and ImportKernels (entries signed by a trusted key, verified before
// anything is stored).
#include <algorithm>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/strip.h"
#include "absl/synchronization/mutex.h"
#include "cache/store_entry.h"
#include "codegen/validate_internal.h"
#include "core/status.h"
#include "core/version.h"
#include "kfuse/storage/v1/storage.pb.h"
#include "service/server.h"

namespace kfuse {
namespace {

// Client text in a message: as it is when it is a plain word (a hex key, a
// kind), quoted and escaped otherwise, so a key or kind cannot forge lines
// in an operator's terminal.
std::string Shown(absl::string_view client_text) {
  const bool plain = !client_text.empty() && client_text.size() <= 64 &&
                     std::all_of(client_text.begin(), client_text.end(), [](char c) {
                       return absl::ascii_isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-' ||
                              c == '.';
                     });
  return plain ? std::string(client_text) : validate_internal::Quote(client_text);
}

grpc::ServerUnaryReactor* Reply(grpc::CallbackServerContext* ctx, const absl::Status& s) {
  auto* r = ctx->DefaultReactor();
  r->Finish(ToGrpc(s));
  return r;
}

// One entry to export: what the listing said, the blob read when its turn
// comes.
struct ExportItem {
  Store::Kind kind;
  EntrySummary summary;
};

// The parts an artifact and its decisions share: chain, spec, device.
std::string PartsWithoutCode(const CacheKey& k) {
  return absl::StrCat(k.chain.size(), ":", k.chain, ";", k.spec.size(), ":", k.spec, ";", k.device);
}

// The artifacts a request selects: by keys (unique prefixes allowed), by
// key prefix, or all; exactly one of the three.
absl::StatusOr<std::vector<EntrySummary>> SelectArtifacts(Store& store, const v1::ExportKernelsRequest& req) {
  const int given = (req.keys_size() > 0) + !req.key_prefix().empty() + req.all();
  if (given != 1) {
    return absl::InvalidArgumentError("export: give exactly one of keys, key_prefix and all");
  }
  if (req.keys_size() > kMaxAdminItems) {
    return absl::InvalidArgumentError(
        absl::StrCat("keys: ", req.keys_size(), " keys, at most ", kMaxAdminItems, " a call"));
  }
  if (req.all()) return store.List("", 0);  // Decisions too, artifact or not.
  if (!req.key_prefix().empty()) {
    // As a key that matches nothing: a prefix that does is most likely
    // mistyped, and an empty bundle would pass for a copy of the store.
    KFUSE_ASSIGN_OR_RETURN(std::vector<EntrySummary> found, store.List(req.key_prefix(), 0, "artifact"));
    if (found.empty()) {
      return absl::NotFoundError(
          absl::StrCat("key_prefix: no stored artifact has a key starting with ", Shown(req.key_prefix())));
    }
    return found;
  }
  std::vector<EntrySummary> out;
  for (int i = 0; i < req.keys_size(); ++i) {
    const std::string& key = req.keys(i);
    if (key.empty()) return absl::InvalidArgumentError(absl::StrCat("keys[", i, "]: empty key"));
    KFUSE_ASSIGN_OR_RETURN(std::vector<EntrySummary> found, store.List(key, 2, "artifact"));
    if (found.empty()) {
      return absl::NotFoundError(
          absl::StrCat("keys[", i, "]: no stored artifact has a key starting with ", Shown(key)));
    }
    if (found.size() > 1) {
      return absl::InvalidArgumentError(
          absl::StrCat("keys[", i, "]: key prefix ", Shown(key), " is ambiguous (", found[0].key.substr(0, 16),
                       "..., ", found[1].key.substr(0, 16), "..., ...); give more characters"));
    }
    out.push_back(std::move(found[0]));
  }
  return out;
}

// Every selected artifact with its tuning decisions before it, each entry
// once. A decision shares its artifact's chain, spec and device; its
// generator part names the families' variant schemas rather than the
// generator versions, so decisions are matched on those three parts.
absl::StatusOr<std::vector<ExportItem>> ExportPlan(Store& store, const v1::ExportKernelsRequest& req) {
  KFUSE_ASSIGN_OR_RETURN(std::vector<EntrySummary> selected, SelectArtifacts(store, req));
  std::multimap<std::string, EntrySummary> decisions;
  if (!req.all()) {
    KFUSE_ASSIGN_OR_RETURN(std::vector<EntrySummary> all, store.List("", 0, "decision"));
    for (EntrySummary& d : all) decisions.emplace(PartsWithoutCode(d.parts), std::move(d));
  }
  std::vector<ExportItem> items;
  std::set<std::string> seen;
  auto add = [&](Store::Kind kind, const EntrySummary& e) {
    if (seen.insert(absl::StrCat(e.kind, "/", e.key)).second) items.push_back({kind, e});
  };
  for (const EntrySummary& e : selected) {
    if (e.kind == "decision") {
      add(Store::Kind::kDecision, e);
      continue;
    }
    auto [first, last] = decisions.equal_range(PartsWithoutCode(e.parts));
    for (auto it = first; it != last; ++it) add(Store::Kind::kDecision, it->second);
    add(Store::Kind::kArtifact, e);
  }
  return items;
}

// The ExportKernels stream: one entry read, signed and written at a time,
// so a large export never holds more than one blob. What to do next is
// decided under the lock; StartWrite and Finish are called outside it, since OnDone
// (which deletes the reactor) may follow Finish on another thread.
class ExportStream final : public grpc::ServerWriteReactor<v1::StoreEntry> {
 public:
  ExportStream(Store* store, const SigningKey* key, std::string node)
      : store_(store), key_(key), node_(std::move(node)) {}

  // Exactly one of Fail and Start is called, and nothing finishes the call
  // before it: the reactor lives at least until then, whatever the caller
  // does.
  void Fail(const absl::Status& s) {
    {
      absl::MutexLock lock(&mu_);
      started_ = finished_ = true;
    }
    Finish(ToGrpc(s));
  }
  void Start(std::vector<ExportItem> items) {
    grpc::Status final;
    bool write = false;
    {
      // The first step is decided under the lock that marks the stream
      // started: once it is released, a cancel may finish (and delete) it.
      absl::MutexLock lock(&mu_);
      items_ = std::move(items);
      started_ = true;
      write = DecideLocked(&final);
    }
    Act(write, final);
  }

  void OnWriteDone(bool ok) override {
    {
      absl::MutexLock lock(&mu_);
      writing_ = false;
      if (!ok) cancelled_ = true;
    }
    Step();
  }
  void OnCancel() override {
    {
      absl::MutexLock lock(&mu_);
      cancelled_ = true;
      if (writing_ || !started_) return;  // OnWriteDone, or Start, finishes.
    }
    Step();
  }
  void OnDone() override { delete this; }

 private:
  // Writes the next entry, or finishes.
  void Step() {
    grpc::Status final;
    bool write = false;
    {
      absl::MutexLock lock(&mu_);
      if (finished_ || writing_) return;
      write = DecideLocked(&final);
    }
    Act(write, final);
  }
  // The next entry loaded (true), or the stream marked finished with *final.
  bool DecideLocked(grpc::Status* final) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (!cancelled_ && Load()) {
      writing_ = true;
      return true;
    }
    finished_ = true;
    *final = cancelled_ ? grpc::Status(grpc::StatusCode::CANCELLED, "export: the caller left") : final_;
    return false;
  }
  // Outside the lock: nothing of this object is touched after either call.
  void Act(bool write, const grpc::Status& final) {
    if (write) {
      StartWrite(&current_);  // current_ is not touched again before OnWriteDone.
    } else {
      Finish(final);
    }
  }
  // The next stored entry into current_, signed; false at the end or on a
  // read error (final_ says which).
  bool Load() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    while (next_ < items_.size()) {
      const ExportItem& item = items_[next_++];
      const EntrySummary& e = item.summary;
      absl::StatusOr<std::optional<std::string>> blob = item.kind == Store::Kind::kArtifact
                                                            ? store_->GetArtifactByKey(e.key)
                                                            : store_->GetDecisionByKey(e.key);
      if (!blob.ok()) {
        final_ = ToGrpc(blob.status());
        return false;
      }
      if (!blob->has_value()) continue;  // Deleted or evicted since the listing.
      current_ = MakeStoreEntry(item.kind, e.parts, e.meta, std::move(**blob),
                                EntryOrigin{node_, e.created_ms, kKfuseVersion});
      SignStoreEntry(*key_, &current_);
      return true;
    }
    return false;
  }

  Store* store_;
  const SigningKey* key_;
  const std::string node_;
  absl::Mutex mu_;
  std::vector<ExportItem> items_ ABSL_GUARDED_BY(mu_);
  size_t next_ ABSL_GUARDED_BY(mu_) = 0;
  v1::StoreEntry current_;  // Written by Load under mu_; read by gRPC until OnWriteDone.
  grpc::Status final_ ABSL_GUARDED_BY(mu_);
  bool started_ ABSL_GUARDED_BY(mu_) = false;
  bool writing_ ABSL_GUARDED_BY(mu_) = false;
  bool cancelled_ ABSL_GUARDED_BY(mu_) = false;
  bool finished_ ABSL_GUARDED_BY(mu_) = false;
};

// "artifact 0123456789abcdef" for messages; the kind is client text, so
// kept short.
std::string EntryName(const v1::StoreEntry& e) {
  return absl::StrCat(Shown(e.kind().substr(0, 16)), " ", Shown(e.key().substr(0, 16)));
}

// "<kind> <key prefix>: <reason>", whichever of the helpers' prefixes the
// reason came with.
std::string Rejection(const v1::StoreEntry& e, const absl::Status& s) {
  absl::string_view reason = s.message();
  absl::ConsumePrefix(&reason, absl::StrCat(e.kind(), " ", e.key().substr(0, 16), ": ")) ||
      absl::ConsumePrefix(&reason, absl::StrCat("entry ", e.key().substr(0, 16), ": "));
  return absl::StrCat(EntryName(e), ": ", reason);
}

// What a trusted signer could still get wrong: a blob that is not the
// record its kind says, or an artifact whose plan is filed under another key.
absl::Status CheckBlob(const v1::StoreEntry& e) {
  if (e.kind() == "decision") {
    storage::v1::Decision d;
    if (!d.ParseFromString(e.blob()))
      return absl::InvalidArgumentError("blob is not a kfuse.storage.v1.Decision");
    return absl::OkStatus();
  }
  storage::v1::Artifact a;
  if (!a.ParseFromString(e.blob()))
    return absl::InvalidArgumentError("blob is not a kfuse.storage.v1.Artifact");
  if (a.plan().key() != e.key()) {
    return absl::InvalidArgumentError(
        absl::StrCat("the plan inside is keyed ", a.plan().key().substr(0, 16), ", not the entry's key"));
  }
  return absl::OkStatus();
}

// The whole check of one entry, before anything is stored.
absl::Status CheckImport(const v1::StoreEntry& e, const TrustedKeys& trusted) {
  KFUSE_RETURN_IF_ERROR(VerifyStoreEntry(e, trusted));
  KFUSE_RETURN_IF_ERROR(CheckEntryKey(e));
  return CheckBlob(e);
}

// The entry is stored under its key with the same blob.
absl::StatusOr<bool> AlreadyStored(Store& store, const v1::StoreEntry& e) {
  KFUSE_ASSIGN_OR_RETURN(std::optional<std::string> blob, e.kind() == "decision"
                                                              ? store.GetDecisionByKey(e.key())
                                                              : store.GetArtifactByKey(e.key()));
  return blob.has_value() && Sha256Hex(*blob) == e.blob_sha256();
}

}  // namespace

grpc::ServerUnaryReactor* KernelServiceImpl::Explain(grpc::CallbackServerContext* ctx,
                                                     const v1::CompileRequest* req,
                                                     v1::ExplainResponse* resp) {
  if (absl::Status a = Authorize(ctx); !a.ok()) return Reply(ctx, a);
  absl::StatusOr<Prepared> p = pipeline_->Prepare(*req);
  if (!p.ok()) return Reply(ctx, p.status());
  if (absl::Status room = AdminRoom(); !room.ok()) return Reply(ctx, room);
  // The store's reads and the fleet's probe (a round trip to its database)
  // run on an admin thread, never on a gRPC callback thread.
  grpc::ServerUnaryReactor* reactor = ctx->DefaultReactor();
  admin_pool_->Submit([this, ctx, reactor, resp, p = *std::move(p)] {
    reactor->Finish(ctx->IsCancelled() ? grpc::Status(grpc::StatusCode::CANCELLED, "explain cancelled")
                                       : ToGrpc(ExplainOn(p, resp)));
  });
  return reactor;
}

absl::Status KernelServiceImpl::ExplainOn(const Prepared& p, v1::ExplainResponse* resp) {
  Store& store = *pipeline_->deps().store;
  KFUSE_ASSIGN_OR_RETURN(const Explanation ex, store.Explain(p.key, p.decision_key));
  CacheKey nearest;
  if (!ex.nearest_key.empty()) {
    KFUSE_ASSIGN_OR_RETURN(std::vector<EntrySummary> n, store.List(ex.nearest_key, 1));
    if (!n.empty()) nearest = n[0].parts;  // A decision's toolchain is empty.
  }
  resp->set_key(p.key.ArtifactKey());
  resp->set_found(ex.found_exact);
  resp->set_nearest_key(ex.nearest_key);
  for (const std::string& d : ex.differing_parts) resp->add_differing_parts(d);
  const auto mine = p.key.Parts();
  const auto theirs = nearest.Parts();
  for (size_t i = 0; i < mine.size(); ++i) {
    v1::KeyPart* part = resp->add_parts();
    part->set_name(mine[i].first);
    part->set_value(mine[i].second);
    part->set_nearest_value(theirs[i].second);
  }
  // What a miss costs here: the store cannot tell whether this server tunes.
  std::string text = ex.text;
  if (pipeline_->options().read_only) {
    if (!ex.found_exact) absl::StrAppend(&text, "\nthis server is read-only: a miss is refused, not built");
  } else if (!ex.found_exact && !ex.nearest_key.empty() && !ex.decision_stored) {
    absl::StrAppend(&text, p.can_tune && p.mode != TuneMode::kHeuristic
                               ? ": a miss means tuning"
                               : ": this server does not tune it, so a miss compiles the heuristic variant");
  }
  resp->set_text(text);
  FleetTier* fleet = pipeline_->deps().fleet;
  resp->set_fleet(fleet == nullptr ? "off" : fleet->Probe(p.key));
  return absl::OkStatus();
}

grpc::ServerWriteReactor<v1::StoreEntry>* KernelServiceImpl::ExportKernels(
    grpc::CallbackServerContext* ctx, const v1::ExportKernelsRequest* req) {
  auto* stream = new ExportStream(pipeline_->deps().store, options_.signing_key, pipeline_->options().node);
  if (absl::Status a = Authorize(ctx); !a.ok()) {
    stream->Fail(a);
    return stream;
  }
  if (options_.signing_key == nullptr) {
    stream->Fail(
        absl::FailedPreconditionError("export: this server has no signing key to sign entries with"));
    return stream;
  }
  if (absl::Status room = AdminRoom(); !room.ok()) {
    stream->Fail(room);
    return stream;
  }
  // The listing reads the whole store: on an admin thread. `req` lives until
  // the stream finishes.
  admin_pool_->Submit([this, stream, req] {
    absl::StatusOr<std::vector<ExportItem>> items = ExportPlan(*pipeline_->deps().store, *req);
    if (items.ok()) {
      stream->Start(*std::move(items));
    } else {
      stream->Fail(items.status());
    }
  });
  return stream;
}

grpc::ServerUnaryReactor* KernelServiceImpl::ImportKernels(grpc::CallbackServerContext* ctx,
                                                           const v1::ImportKernelsRequest* req,
                                                           v1::ImportKernelsResponse* resp) {
  if (absl::Status a = Authorize(ctx); !a.ok()) return Reply(ctx, a);
  if (pipeline_->options().read_only) {
    return Reply(ctx, absl::FailedPreconditionError("this server is read-only; import into one that is not"));
  }
  if (req->entries_size() > kMaxAdminItems) {
    return Reply(ctx, absl::InvalidArgumentError(absl::StrCat("entries: at most ", kMaxAdminItems,
                                                              " a request, got ", req->entries_size())));
  }
  TrustedKeys trusted = options_.trusted_keys != nullptr ? *options_.trusted_keys : TrustedKeys();
  if (options_.signing_key != nullptr) trusted.Add(options_.signing_key->public_key);

  if (absl::Status room = AdminRoom(); !room.ok()) return Reply(ctx, room);
  // Every entry is checked before any is stored.
  std::vector<const v1::StoreEntry*> accepted;
  for (const v1::StoreEntry& e : req->entries()) {
    if (absl::Status s = CheckImport(e, trusted); !s.ok()) {
      options_.metrics->VerificationFailure("import");
      resp->add_rejected(Rejection(e, s));
    } else {
      accepted.push_back(&e);
    }
  }
  // Each Put is an fsynced transaction: the writes run on an admin thread,
  // so a large import never holds a gRPC callback thread nor waits behind
  // tuning jobs. `req` and `resp` live until the reactor finishes.
  grpc::ServerUnaryReactor* reactor = ctx->DefaultReactor();
  admin_pool_->Submit([this, ctx, reactor, resp, accepted = std::move(accepted)] {
    Store& store = *pipeline_->deps().store;
    uint32_t present = 0;
    std::vector<const v1::StoreEntry*> stored_here;  // Imported by this call.
    absl::Status failed;
    for (const v1::StoreEntry* e : accepted) {
      if (ctx->IsCancelled()) {  // The caller left, or the server is stopping.
        failed = absl::CancelledError("import cancelled");
        break;
      }
      absl::StatusOr<bool> stored = AlreadyStored(store, *e);
      if (stored.ok() && *stored) {
        ++present;
        continue;
      }
      absl::Status s = stored.ok() ? PutStoreEntry(store, *e) : stored.status();
      if (absl::IsInvalidArgument(s)) {  // This entry (larger than the store's cap, say).
        resp->add_rejected(Rejection(*e, s));
        continue;
      }
      if (!s.ok()) {  // The store's fault, not the entry's: the import stops.
        failed = s;
        break;
      }
      stored_here.push_back(e);
    }
    const auto imported = static_cast<uint32_t>(stored_here.size());
    if (imported > 0) {
      pipeline_->ClearHot();  // Entries may have replaced what memory holds.
      answers_.Clear();
    }
    if (!failed.ok()) {
      reactor->Finish(ToGrpc(absl::Status(
          failed.code(), absl::StrCat("import stopped after storing ", imported, " of ", accepted.size(),
                                      " entries (importing again skips those): ", failed.message()))));
      return;
    }
    // A store smaller than the call's entries evicts the first to make room
    // for the later ones: counted (by key, no blob read), so "imported"
    // does not overstate what stays.
    uint32_t evicted = 0;
    for (const v1::StoreEntry* e : stored_here) {
      absl::StatusOr<std::vector<EntrySummary>> still = store.List(e->key(), 1, e->kind());
      evicted += still.ok() && still->empty();
    }
    resp->set_imported(imported);
    resp->set_already_present(present);
    resp->set_evicted(evicted);
    reactor->Finish(grpc::Status::OK);
  });
  return reactor;
}

}  // namespace kfuse
