// The `kfuse` command line: CLI11 wiring only; the subcommands are in cli_*.cc.
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <string>
#include <vector>

#include "CLI/CLI.hpp"
#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "clients/cli.h"
#include "clients/cli_format.h"
#include "core/utf8.h"

int main(int argc, char** argv) {
  using namespace kfuse::client;  // NOLINT: a main's wiring.
  GlobalOptions g;
  // An empty value would read as the option not given (a default, or the
  // file's own): refused, naming the option. --arch "native" asks for the
  // server's GPU on purpose.
  // Text sent in a request must be UTF-8: protobuf drops what is not, with a
  // log line, and the request would name something else.
  const CLI::Validator utf8(
      [](const std::string& s) { return kfuse::IsUtf8(s) ? std::string() : std::string("is not valid UTF-8"); }, "");
  const auto naming = [](const char* what) {
    return CLI::Validator(
        [what](const std::string& s) {
          if (s.empty()) return absl::StrCat("must name ", what);
          return kfuse::IsUtf8(s) ? std::string() : std::string("is not valid UTF-8");
        },
        "");
  };
  // Paths stay on this machine: any bytes but none.
  const auto a_path = [](const char* what) {
    return CLI::Validator(
        [what](const std::string& s) { return s.empty() ? absl::StrCat("must name ", what) : std::string(); },
        "");
  };
  const CLI::Validator an_arch = naming("a target (sm_90, sm_90a, ..., or native)");
  const CLI::Validator a_file = a_path("a file");
  const CLI::Validator a_folder = a_path("a folder");
  // A finite number: one past a double's range would be read as 0 or
  // infinity (--scale 1e-400 as 0, --timeout 1e999 as no deadline), and
  // inf or nan mean no number. Subnormals are numbers.
  const CLI::Validator real(
      [](const std::string& s) {
        errno = 0;
        char* end = nullptr;
        const double v = std::strtod(s.c_str(), &end);
        if (!std::isfinite(v) || (errno == ERANGE && v == 0)) {
          return std::string("expected a finite number within a double's range");
        }
        return std::string();
      },
      "");
  // A whole number in base 10 within int64, written back as such: CLI11
  // would clamp one past int64 to its limit and read 0100 as octal.
  const CLI::Validator whole(
      [](std::string& s) {
        int64_t v = 0;
        if (!absl::SimpleAtoi(s, &v)) return std::string("expected a whole number (base 10) within int64");
        s = absl::StrCat(v);
        return std::string();
      },
      "");
  CLI::App app{"kfuse: compile, tune and manage fused GPU kernels on kfused"};
  app.require_subcommand(1);
  app.fallthrough();  // Global flags may follow the subcommand too.
  app.option_defaults()->always_capture_default();
  app.add_option("--server", g.server, "kfused address HOST:PORT")
      ->envname("KFUSE_SERVER");
  app.add_flag("--json", g.json, "machine output: the proto JSON mapping");
  app.add_option("--timeout", g.timeout_seconds,
                 "seconds per call (tuning adds its budget)")->check(real);
  app.add_flag("--tls", g.tls, "TLS with the system roots (implied by --tls-ca)");
  // Empty, these would silently drop TLS, a client certificate or plan
  // verification (--verify-key "$UNSET"); an empty variable is ignored.
  app.add_option("--tls-ca", g.tls_ca, "PEM CA that signs the server's certificate")
      ->envname("KFUSE_TLS_CA")
      ->check(a_file);
  app.add_option("--tls-cert", g.tls_cert, "PEM client certificate (mutual TLS)")
      ->envname("KFUSE_TLS_CERT")
      ->check(a_file);
  app.add_option("--tls-key", g.tls_key, "PEM key of --tls-cert")->envname("KFUSE_TLS_KEY")->check(a_file);
  app.add_option("--token-file", g.token_file, "file whose first line is the bearer token")->check(a_file);
  app.add_option("--token", g.token, "bearer token (prefer --token-file: argv is visible to others)")
      ->envname("KFUSE_TOKEN")
      ->check(naming("a token"));
  app.add_option("--verify-key", g.verify_key,
                 "kfused's public key (hex or file): refuse plans it did not sign")
      ->envname("KFUSE_VERIFY_KEY")
      ->check(a_path("a key (64 hex digits, or a file)"));  // A file's path: any bytes.

  CompileOptions compile;
  auto* c = app.add_subcommand("compile", "compile a chain, print its plan");
  c->add_option("chain", compile.chain_path,
                "kfuse.v1.Chain (or CompileRequest) in JSON")
      ->required()
      ->check(a_file);
  c->add_option("-o,--out", compile.plan_out, "write the KernelPlan (binary)")->check(a_file);
  c->add_option("--plan-json", compile.plan_json_out, "write the KernelPlan (JSON)")->check(a_file);
  c->add_option("--cubin-dir", compile.cubin_dir, "write each kernel as DIR/<entry>.cubin")->check(a_folder);
  c->add_option("--arch", compile.arch, "target: sm_80, sm_90, sm_90a, ...")->check(an_arch);
  // --mode too: tune's name for it, and the Python client's.
  c->add_option("--policy,--mode", compile.policy, "heuristic|quick|full")
      ->check(naming("heuristic, quick or full"));
  c->add_option("--budget", compile.budget_seconds, "tuning budget, seconds")->check(real);
  c->add_flag("--source", compile.source,
              "ask for the CUDA C++ (written beside the cubins, or printed)");

  TuneOptions tune;
  auto* t = app.add_subcommand("tune", "tune a chain, showing progress");
  t->add_option("chain", tune.chain_path, "kfuse.v1.Chain (or CompileRequest) in JSON")->check(a_file);
  t->add_option("--budget", tune.budget_seconds, "tuning budget, seconds")->check(real);
  t->add_option("--mode,--policy", tune.mode, "quick|full")->check(naming("quick or full"));
  t->add_option("--arch", tune.arch, "target: sm_80, sm_90, sm_90a, ...")->check(an_arch);
  t->add_flag("--force", tune.force, "retune even if a decision is stored");
  auto* manifest = t->add_option(
      "--manifest", tune.manifest,
      "tune every chain and shape bucket a manifest lists (docs/api.md)")
      ->check(a_file);
  // Without a manifest they would do nothing: refused as usage errors.
  t->add_option("--budget-total", tune.budget_total_seconds,
                "with --manifest: start no item after this many seconds")
      ->needs(manifest)->check(real);
  t->add_option("--state", tune.state,
                "with --manifest: finished items (default MANIFEST.state); a "
                "rerun skips them")
      ->needs(manifest)
      ->check(a_file);

  auto* cache = app.add_subcommand(
      "cache", "list, show, remove, explain, export, import stored kernels");
  cache->require_subcommand(1);
  CacheLsOptions ls;
  auto* cls = cache->add_subcommand("ls", "list stored kernels");
  cls->add_option("--prefix", ls.prefix, "only keys starting with this")->check(utf8);
  cls->add_option("--limit", ls.limit, "at most this many (0: server default)");
  std::string show_key;
  auto* cshow = cache->add_subcommand("show", "one stored kernel's summary");
  cshow->add_option("key", show_key, "key or unique key prefix")->required()->check(naming("a key"));
  CacheRmOptions rm;
  auto* crm = cache->add_subcommand("rm", "remove stored kernels");
  crm->add_option("keys", rm.keys, "keys or unique key prefixes")->check(naming("a key"));
  crm->add_flag("--all", rm.all, "remove every stored kernel");
  CacheExplainOptions explain;
  auto* cexplain = cache->add_subcommand(
      "explain",
      "why a chain would miss: its key parts against the nearest stored entry");
  cexplain
      ->add_option("chain", explain.chain_path,
                   "kfuse.v1.Chain (or CompileRequest) in JSON")
      ->required()
      ->check(a_file);
  cexplain->add_option("--arch", explain.arch, "target: sm_80, sm_90, sm_90a, ...")->check(an_arch);
  cexplain->add_option("--policy,--mode", explain.policy, "heuristic|quick|full")
      ->check(naming("heuristic, quick or full"));
  CacheExportOptions exp;
  auto* cexport = cache->add_subcommand(
      "export", "write stored kernels (signed by the server) to a bundle file");
  cexport->add_option("keys", exp.keys, "artifact keys or unique key prefixes")->check(naming("a key"));
  cexport->add_option("--prefix", exp.prefix,
                      "every artifact whose key starts with this")
      ->check(naming("a key prefix (--all: every entry)"));
  cexport->add_flag("--all", exp.all, "every stored entry");
  cexport->add_option("-o,--out", exp.out, "the bundle file (-: standard output)")->required()->check(a_file);
  std::string import_path;
  auto* cimport =
      cache->add_subcommand("import",
                            "send a bundle's entries to the server (it keeps "
                            "those signed by a key it trusts)");
  cimport
      ->add_option("bundle", import_path, "a file `kfuse cache export` wrote (-: standard input)")
      ->required()
      ->check(a_file);

  auto* device = app.add_subcommand("device", "the server's GPU, or why none");
  std::string health_service;
  auto* health = app.add_subcommand("health", "grpc.health.v1 check");
  health->add_option("--service", health_service,
                     "service name (default: the whole server)")->check(utf8);
  auto* version = app.add_subcommand("version", "client and API version");

  ChainOptions chain;
  auto* ch = app.add_subcommand("chain", "print a composite's chain JSON");
  ch->add_option("composite", chain.composite,
                 "softmax|log_softmax|layer_norm|rms_norm|add_rms_norm|"
                 "add_layer_norm|linear|attention|cross_entropy|nll_loss")
      ->required()
      ->check(utf8);
  ch->add_option("--dtype", chain.dtype, "f32|bf16|f16 (attention: bf16|f16)")->check(utf8);
  ch->add_option("--width", chain.width,
                 "the normalised (last) dim; linear: in-features (all but attention)")->transform(whole);
  ch->add_option("--rows", chain.rows, "a static row count")->transform(whole);
  const CLI::Validator named = naming("a symbol");
  ch->add_option("--rows-symbol", chain.rows_symbol,
                 "a runtime row count of this symbol (instead of --rows)")
      ->check(named);
  ch->add_option("--rows-hint", chain.rows_hint,
                 "the rows to tune for (with --rows-symbol; 0: the server tunes for 1048576)")->transform(whole);
  ch->add_option("--eps", chain.eps, "norms: 1e-5 (layer), 1e-6 (RMS)")->check(real);
  ch->add_option("--scale", chain.scale,
                 "softmax: x * scale first; attention: the scores' (default 1/sqrt(head dim))")
      ->check(real);
  ch->add_flag("--mask", chain.mask,
               "softmax: a bool input of x's shape; attention: bool [B, H, Sq, Sk]");
  ch->add_flag("--bias", chain.bias,
               "softmax: an additive input of x's shape; layer norms: [W]; linear: [out]; "
               "attention: [B, H, Sq, Sk]");
  ch->add_option("--out-features", chain.out_features,
                 "linear: out-features (the weight is [out, width])")->transform(whole);
  ch->add_option("--activation", chain.activation,
                 "linear: none|relu|silu|gelu|gelu_tanh|sigmoid|tanh")
      ->check(naming("none, relu, silu, gelu, gelu_tanh, sigmoid or tanh"));
  ch->add_flag("--no-weight", chain.no_weight, "norms: no weight input");
  ch->add_option("--labels-dtype", chain.labels_dtype,
                 "cross_entropy, nll_loss: the labels' i32|i64 (default i64)")->check(naming("i32 or i64"));
  ch->add_option("--ignore-index", chain.ignore_index,
                 "cross_entropy, nll_loss: the label that loses nothing (default -100)")->transform(whole);
  ch->add_option("--reduction", chain.reduction,
                 "cross_entropy, nll_loss: none|sum|mean (default mean)")->check(naming("none, sum or mean"));
  ch->add_option("--batch", chain.batch, "attention: the batch (default 1)")->transform(whole);
  ch->add_option("--heads", chain.heads, "attention: query heads")->transform(whole);
  ch->add_option("--kv-heads", chain.kv_heads,
                 "attention: key/value heads, dividing --heads (default --heads)")->transform(whole);
  ch->add_option("--seq", chain.seq, "attention: both sequence lengths")->transform(whole);
  ch->add_option("--seq-symbol", chain.seq_symbol,
                 "attention: both sequences of this runtime length (instead of --seq)")
      ->check(named);
  ch->add_option("--seq-hint", chain.seq_hint,
                 "attention: the length to tune for (with --seq-symbol)")->transform(whole);
  ch->add_option("--seq-q", chain.seq_q, "attention: the query length (over --seq)")->transform(whole);
  ch->add_option("--seq-k", chain.seq_k, "attention: the key length (over --seq)")->transform(whole);
  ch->add_option("--head-dim", chain.head_dim, "attention: q's and k's last dim")->transform(whole);
  ch->add_option("--value-dim", chain.value_dim,
                 "attention: v's last dim (default --head-dim)")->transform(whole);
  ch->add_flag("--causal", chain.causal, "attention: key j <= query i");
  ch->add_flag("--lengths", chain.lengths,
               "attention: an i32 input [B]; keys at or past a sequence's length are masked");
  ch->add_flag("--lse", chain.lse,
               "attention: the f32 log-sum-exp output \"lse\" [B, H, Sq] too");
  ch->add_option("-o,--out", chain.out, "write the JSON to FILE")->check(a_file);

  ReproOptions repro;
  auto* rp = app.add_subcommand(
      "repro", "replay a repro bundle kfused left: regenerate, compile, run (no server)");
  rp->add_option("bundle", repro.bundle_dir, "the bundle's directory")->required()->check(a_folder);
  rp->add_flag("--regenerated", repro.regenerated,
               "judge this build's generated source, not the recorded kernel.cu");
  rp->add_option("--worker", repro.worker, "path of kfuse-worker")->check(a_file);
  rp->add_option("--device", repro.device, "CUDA device to run on");

  // Under --json a usage error is a JSON object on standard output too, as
  // every other error is, even where the parse stopped before the flag.
  const bool json = std::any_of(argv + 1, argv + argc, [](const char* a) {
    if (std::strcmp(a, "--json") == 0) return true;
    if (std::strncmp(a, "--json=", 7) != 0) return false;
    const std::string v = absl::AsciiStrToLower(a + 7);
    return v != "false" && v != "0" && v != "off" && v != "no";
  });
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    // `kfuse frob`: CLI11 would say only that a command is required.
    // The innermost command given (`kfuse cache frob`: cache).
    CLI::App* at = &app;
    std::string path = "kfuse";
    for (bool deeper = true; deeper;) {
      deeper = false;
      for (CLI::App* sub : at->get_subcommands([](CLI::App* a) { return a->parsed(); })) {
        at = sub;
        path += " " + sub->get_name();
        deeper = true;
        break;
      }
    }
    std::vector<std::string> rest = at->remaining();
    if (rest.empty()) rest = app.remaining();  // Extras a command does not take go up to the top.
    if (dynamic_cast<const CLI::RequiredError*>(&e) != nullptr && !rest.empty() && !rest.front().empty() &&
        rest.front()[0] != '-') {
      std::vector<std::string> names;
      for (const CLI::App* sub : at->get_subcommands([](CLI::App*) { return true; })) names.push_back(sub->get_name());
      const std::string message = absl::StrCat(path, ": unknown command '", rest.front(), "' (one of ",
                                               absl::StrJoin(names, ", "), "; see ", path, " --help)");
      std::cerr << PrintableLines(message) << "\n";
      if (json) PrintJsonError(absl::InvalidArgumentError(message), std::cout);
      return kExitUsage;
    }
    const int code = app.exit(e);
    if (code == 0) return kExitOk;  // --help, --version.
    if (json) PrintJsonError(absl::InvalidArgumentError(e.what()), std::cout);
    return kExitUsage;
  }

  CliIo io{std::cout, std::cerr, isatty(STDOUT_FILENO) != 0};
  const int rc = [&]() -> int {
    if (c->parsed()) return RunCompile(g, compile, io);
    if (t->parsed()) {
      if (!tune.manifest.empty()) return RunTuneManifest(g, tune, io);
      if (tune.chain_path.empty()) {
        return ReportUsageError(g, absl::InvalidArgumentError("tune: give a chain file or --manifest FILE"), io);
      }
      return RunTune(g, tune, io);
    }
    if (cls->parsed()) return RunCacheLs(g, ls, io);
    if (cshow->parsed()) return RunCacheShow(g, show_key, io);
    if (crm->parsed()) return RunCacheRm(g, rm, io);
    if (cexplain->parsed()) return RunCacheExplain(g, explain, io);
    if (cexport->parsed()) return RunCacheExport(g, exp, io);
    if (cimport->parsed()) return RunCacheImport(g, import_path, io);
    if (device->parsed()) return RunDevice(g, io);
    if (health->parsed()) return RunHealth(g, health_service, io);
    if (version->parsed()) return RunVersion(g, io);
    if (ch->parsed()) return RunChain(g, chain, io);
    if (rp->parsed()) return RunRepro(g, repro, io);
    return kExitUsage;
  }();
  // Output that did not reach standard output (a full disk, say) must not
  // end in an exit code of success.
  std::cout.flush();
  if (!std::cout && rc == kExitOk) {
    std::cerr << "kfuse: writing to standard output failed\n";
    return kExitFailed;
  }
  return rc;
}
