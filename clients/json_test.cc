#include "clients/json.h"

#include <cerrno>
#include <string>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "google/protobuf/struct.pb.h"
#include "gtest/gtest.h"

namespace kfuse::client {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

TEST(JsonTest, ExamplesParse) {
  const char* kExamples[] = {
      "examples/relu_fma_f32.json",   "examples/relu_fma_f32_symbolic.json",
      "examples/gelu_bias_bf16.json", "examples/transcendental_10op_bf16.json",
      "examples/bad_broadcast.json",  "examples/compile_request_sm90.json",
      "examples/softmax_bf16.json",   "examples/rmsnorm_residual_bf16.json",
      "examples/positions_i64.json",
      "examples/mask_lengths_i64.json",
      "examples/padded_vocab_softmax_bf16.json",
      "examples/qk_norm_slice_bf16.json",
  };
  for (const char* path : kExamples) {
    auto req = LoadCompileRequest(path);
    ASSERT_TRUE(req.ok()) << path << ": " << req.status();
    EXPECT_GT(req->chain().inputs_size(), 0) << path;
    EXPECT_GT(req->chain().ops_size(), 0) << path;
    EXPECT_GE(req->chain().outputs_size(), 1) << path;
  }
}

TEST(JsonTest, BareChainBecomesRequest) {
  auto req = LoadCompileRequest("examples/relu_fma_f32.json");
  ASSERT_TRUE(req.ok()) << req.status();
  EXPECT_FALSE(req->has_target());
  ASSERT_EQ(req->chain().ops_size(), 3);
  EXPECT_EQ(req->chain().ops(2).kind(), kfuse::v1::OP_RELU);
  // {"input": 0} sets the oneof even though 0 is the default.
  EXPECT_EQ(req->chain().ops(0).args(0).kind_case(), kfuse::v1::Ref::kInput);
  EXPECT_EQ(req->chain().inputs(0).shape(0).size(), 1048576);
}

TEST(JsonTest, FullRequestKeepsTargetAndPolicy) {
  auto req = LoadCompileRequest("examples/compile_request_sm90.json");
  ASSERT_TRUE(req.ok()) << req.status();
  EXPECT_EQ(req->target().compute_capability(), 90u);
  EXPECT_EQ(req->policy().mode(), kfuse::v1::TuningPolicy::MODE_HEURISTIC);
  EXPECT_EQ(req->chain().inputs(0).shape(0).symbol(), "N");
}

TEST(JsonTest, SymbolicExampleHasHint) {
  auto req = LoadCompileRequest("examples/transcendental_10op_bf16.json");
  ASSERT_TRUE(req.ok()) << req.status();
  EXPECT_EQ(req->chain().inputs(0).shape(0).hint(), 134217728);
  EXPECT_EQ(req->chain().ops(12).kind(), kfuse::v1::OP_CONSTANT);
  EXPECT_DOUBLE_EQ(req->chain().ops(12).value(), 0.1);
}

TEST(JsonTest, RoundTrip) {
  auto req = LoadCompileRequest("examples/gelu_bias_bf16.json");
  ASSERT_TRUE(req.ok()) << req.status();
  auto again = ParseCompileRequest(ToJson(*req), "round trip");
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(again->SerializeAsString(), req->SerializeAsString());
}

struct BadCase {
  const char* name;
  std::string json;
  const char* expect;  // In the message.
};

TEST(JsonTest, BadInputIsInvalidArgumentWithUsefulMessage) {
  const BadCase kCases[] = {
      {"syntax", "{\n  \"inputs\": [\n    {\"name\": \"a\",, }\n  ]\n}",
       "t.json"},
      {"syntax position", "{\n  \"ops\": [ ]]\n}", "t.json:2:13: not a valid"},
      {"unterminated", "{\"inputs\": [{\"name\": \"a}]}", "t.json:1:22"},
      {"double comma", "{\n \"inputs\": [\n  {\"name\": \"a\",, }\n ]\n}",
       "t.json:3:16: not a valid kfuse.v1.Chain in JSON: Expected"},
      {"caret", "{\"ops\": [ ]]}", "\n  {\"ops\": [ ]]}\n             ^"},
      {"missing comma", "{\n \"inputs\": [\n  {\"name\": \"a\" \"dtype\": \"DTYPE_F32\"}\n ]\n}",
       "t.json:3:16: not a valid kfuse.v1.Chain in JSON: Expected , or }"},
      {"missing comma after object", "{\"inputs\": [{\"name\": \"a\"} {\"name\": \"b\"}]}",
       "t.json:1:27"},
      {"missing colon", "{\"inputs\" []}", "t.json:1:11"},
      {"missing comma after number", "{\"ops\": [{\"value\": 1.5e-3 \"kind\": \"OP_CONSTANT\"}]}",
       "t.json:1:27"},
      {"unknown field", "{\"opz\": []}", "opz"},
      {"bad enum", "{\"ops\": [{\"kind\": \"OP_FROB\"}]}", "OP_FROB"},
      // protobuf names these without their place: the walk finds it.
      {"unknown field's place", "{\n \"ops\": [{\"kind\": \"OP_RELU\", \"axez\": [1]}]}",
       "t.json:2:30: not a valid kfuse.v1.Chain in JSON: (ops[0]) axez: Cannot find field.\n   \"ops\""},
      // Lines ended by a lone \r count as lines, as editors count them.
      {"a line ended by a lone CR", "{\"ops\": [],\r \"opz\": 1}",
       "t.json:2:2: not a valid kfuse.v1.Chain in JSON: opz: Cannot find field.\n   \"opz\": 1}\n   ^"},
      {"a long unknown key is cut", absl::StrCat("{\"", std::string(4000, 'k'), "\u00e9\": 1}"),
       "not a valid kfuse.v1.Chain in JSON: kkkk"},
      {"bad enum's place", "{\"inputs\": [{\"dtype\": \"DTYPE_F32\"}],\n \"ops\": [{\"kind\": \"OP_FROB\"}]}",
       "t.json:2:19: not a valid kfuse.v1.Chain in JSON: (ops[0].kind): invalid value \"OP_FROB\""},
      // An enum value spelt without its prefix, or in another case: the
      // value meant; one nothing matches: how the values are written.
      {"op kind without its prefix", "{\"ops\": [{\"kind\": \"relu\"}]}",
       "\"relu\" for type type.googleapis.com/kfuse.v1.OpKind (did you mean OP_RELU?)"},
      {"an op kind that ends another's", "{\"ops\": [{\"kind\": \"erf\"}]}", "(did you mean OP_ERF?)"},
      {"dtype in another spelling", "{\"inputs\": [{\"dtype\": \"float32\"}]}",
       "(DType values are written DTYPE_F32, DTYPE_F16"},
      // What protobuf's parser forgives: a repeated key (it keeps the last)
      // and a comma that ends an object or array.
      {"repeated key",
       "{\"inputs\": [],\n \"outputs\": [{\"name\": \"a\"}],\n \"outputs\": []}",
       "t.json:3:2: not a valid kfuse.v1.Chain in JSON: the key \"outputs\" again in one object"},
      {"trailing comma in an array", "{\"inputs\": [{\"name\": \"a\"},]}",
       "t.json:1:26: not a valid kfuse.v1.Chain in JSON: a comma before ']'"},
      {"trailing comma in an object", "{\"inputs\": [{\"name\": \"a\",}]}", "a comma before '}'"},
      // A field under two spellings is the same field given twice.
      {"a field by both its names",
       R"({"ops": [{"kind": "OP_CONSTANT", "weak_float": true, "weakFloat": false}]})",
       "t.json:1:54: not a valid kfuse.v1.Chain in JSON: the key \"weakFloat\" again in one object, as "
       "\"weak_float\" before"},
      {"a key spelt with an escape", R"({"ops": [{"kind": "OP_CONSTANT", "val\u0075e": 1, "value": 2}]})",
       "t.json:1:51: not a valid kfuse.v1.Chain in JSON: the key \"value\" again in one object"},
      {"a bare key", R"({ops: [], "ops": []})", "t.json:1:11: not a valid kfuse.v1.Chain in JSON: the key \"ops\""},
      {"single quotes", R"({"ops": [{'kind': "OP_ADD", "kind": "OP_MUL"}]})", "the key \"kind\" again"},
      // protobuf's parser reads [[1], [2]] as [1, 2].
      {"a list in a list of numbers", R"({"ops": [{"kind": "OP_REDUCE_SUM", "reduce": {"axes": [1, [2]]}}]})",
       "t.json:1:59: not a valid kfuse.v1.Chain in JSON: a list inside the list \"axes\", whose items are single "
       "values"},
      {"a list in a list of objects", R"({"inputs": [{"shape": [[{"size": 4}]]}]})",
       "a list inside the list \"shape\", whose items are objects"},
      {"a list in the list of ops", R"({"ops": [[]]})", "a list inside the list \"ops\""},
      // Columns count characters, and the caret keeps the line's tabs.
      {"after a name in two-byte letters", "{\"inputs\": [{\"name\": \"\xc3\xa9\xc3\xa9\",}]}",
       "t.json:1:26: not a valid kfuse.v1.Chain in JSON: a comma before '}'"},
      {"a tab before the place", "{\"inputs\":\t[{\"name\": \"a\",}]}",
       "\n  {\"inputs\":\t[{\"name\": \"a\",}]}\n" "  " "          " "\t" "             " "^"},
      {"not an object", "[1, 2]", "t.json"},
      {"empty", "", "t.json"},
  };
  for (const BadCase& c : kCases) {
    auto req = ParseCompileRequest(c.json, "t.json");
    ASSERT_FALSE(req.ok()) << c.name;
    EXPECT_EQ(req.status().code(), absl::StatusCode::kInvalidArgument)
        << c.name;
    EXPECT_THAT(std::string(req.status().message()), HasSubstr(c.expect))
        << c.name << ": " << req.status();
  }
}

// Keys repeat across objects, and brackets, commas and quotes inside
// strings are text: none of it is refused.
TEST(JsonTest, KeysOfOtherObjectsAndStringContentsAreNotRepeats) {
  const std::string json = R"({"inputs": [{"name": "a,]", "dtype": "DTYPE_F32", "shape": [{"size": 4}]},
                                        {"name": "b\"}", "dtype": "DTYPE_F32", "shape": [{"size": 4}]}],
                              "ops": [{"kind": "OP_ADD", "args": [{"input": 0}, {"input": 1}]}],
                              "outputs": [{"name": "name", "value": {"op": 0}}]})";
  auto req = ParseCompileRequest(json, "t.json");
  ASSERT_TRUE(req.ok()) << req.status();
  EXPECT_EQ(req->chain().inputs(1).name(), "b\"}");
}

// In a JSON object read as data (a manifest), lists nest and keys are the
// object's own; a key given twice, however spelt, is refused there too.
TEST(JsonTest, DataObjectsNestListsButNotRepeatedKeys) {
  google::protobuf::Struct data;
  ASSERT_TRUE(ParseJson(R"({"a": [[1, [2]], []], "b": {"a": 1, "weakFloat": 2, "weak_float": 3}})", "m.json",
                        &data)
                  .ok());
  EXPECT_EQ(data.fields().at("a").list_value().values(0).list_value().values_size(), 2);
  absl::Status s = ParseJson(R"({"entries": [], "entri\u0065s": [1]})", "m.json", &data);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(s.message()), HasSubstr("m.json:1:17: not a JSON object: the key \"entries\" again in one object"));
  // Bare keys may start with $ (protobuf's parser takes them); two such
  // are two keys.
  ASSERT_TRUE(ParseJson(R"({"b": [{$N: 4096, $M: 8}]})", "m.json", &data).ok());
  EXPECT_EQ(data.fields().at("b").list_value().values(0).struct_value().fields_size(), 2);
}

TEST(JsonTest, ListsAreWrittenAsListsWithoutNulls) {
  const BadCase kCases[] = {
      // protobuf's parser takes an item alone as a list of one (the proto
      // JSON mapping, and Python's reader, do not) and drops a null item.
      {"an item alone", R"({"inputs": {"name": "a", "shape": [{"size": 4}]}})",
       "t.json:1:12: not a valid kfuse.v1.Chain in JSON: \"inputs\" is a list: write its items in [ ]"},
      {"a number alone", R"({"ops": [{"kind": "OP_REDUCE_SUM", "reduce": {"axes": -1}}]})",
       "\"axes\" is a list: write its items in [ ]"},
      {"a null item", R"({"ops": [{"kind": "OP_REDUCE_SUM", "reduce": {"axes": [null]}}]})",
       "t.json:1:56: not a valid kfuse.v1.Chain in JSON: null in the list \"axes\" (it would be read as no item"},
      {"a null among objects", R"({"inputs": [{"name": "a"}, null]})", "null in the list \"inputs\""},
      // A key given twice in a request: the walk's word, with its place,
      // where protobuf (refusing a Struct's repeated key) had neither.
      {"a request's repeated key", "{\"chain\": {},\n \"policy\": {\"mode\": \"MODE_QUICK\", \"mode\": \"MODE_FULL\"}}",
       "t.json:2:35: not a valid kfuse.v1.CompileRequest in JSON: the key \"mode\" again in one object"},
      // A repeated key inside an object does not hide the later keys: this
      // is still a request.
      {"a repeated key, then the chain", R"({"policy": {"mode": "MODE_FULL", "mode": "MODE_QUICK", "background": true}, "chain": {}})",
       "not a valid kfuse.v1.CompileRequest in JSON: the key \"mode\" again"},
      {"two chains", R"({"chain": {}, "chain": {}})",
       "t.json:1:15: not a valid kfuse.v1.CompileRequest in JSON: the key \"chain\" again"},
      // Single-quoted text: protobuf's own errors keep their place.
      {"a single-quoted bad enum", "{'ops': [{'kind': 'OP_BOGUS'}]}",
       "not a valid kfuse.v1.Chain in JSON: (ops[0].kind): invalid value \"OP_BOGUS\""},
  };
  for (const BadCase& c : kCases) {
    auto req = ParseCompileRequest(c.json, "t.json");
    ASSERT_FALSE(req.ok()) << c.name;
    EXPECT_EQ(req.status().code(), absl::StatusCode::kInvalidArgument) << c.name;
    EXPECT_THAT(std::string(req.status().message()), HasSubstr(c.expect)) << c.name << ": " << req.status();
    EXPECT_LT(req.status().message().size(), 800u) << c.name;  // No long echo of the text.
  }
  // "chain": null is a request of an empty chain, as "chain": {} is.
  auto empty = ParseCompileRequest(R"({"chain": null, "requestId": "r"})", "t.json");
  ASSERT_TRUE(empty.ok()) << empty.status();
  EXPECT_TRUE(empty->has_chain());
  EXPECT_EQ(empty->request_id(), "r");
  // A null for a whole field is that field unset.
  auto req = ParseCompileRequest(R"({"inputs": null, "ops": [{"kind": "OP_RELU", "reduce": null}]})", "t.json");
  ASSERT_TRUE(req.ok()) << req.status();
  EXPECT_EQ(req->chain().ops_size(), 1);
  // The single-quoted bad enum's place is its own, not the first quote.
  auto quoted = ParseCompileRequest("{'ops': [{'kind': 'OP_BOGUS'}]}", "t.json");
  EXPECT_THAT(std::string(quoted.status().message()), Not(HasSubstr("t.json:1:2:")));
}

// A small file nested 20000 deep took the parser 12 s: refused before it.
TEST(JsonTest, DeepNestingIsRefusedBeforeParsing) {
  const std::string deep = "{\"ops\": " + std::string(20000, '[') + std::string(20000, ']') + "}";
  auto req = ParseCompileRequest(deep, "deep.json");
  ASSERT_FALSE(req.ok());
  EXPECT_EQ(req.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(req.status().message()), HasSubstr("deep.json: JSON nested more than"));
}

// A JSON object read as data (a manifest) nests at most 32 deep, said so,
// where protobuf's parser fails past 33 without a word of why.
TEST(JsonTest, DataNestsAtMost32Deep) {
  const auto nested = [](int depth) {
    std::string s;
    for (int i = 0; i < depth; ++i) s += "{\"a\": ";
    s += "1";
    for (int i = 0; i < depth; ++i) s += "}";
    return s;
  };
  google::protobuf::Struct data;
  EXPECT_TRUE(ParseJson(nested(32), "m.json", &data).ok());
  absl::Status deep = ParseJson(nested(33), "m.json", &data);
  EXPECT_EQ(deep.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(deep.message()), HasSubstr("m.json: JSON nested more than 32 levels deep"));
}

TEST(JsonTest, MissingFileIsNotFoundNamingPath) {
  auto req = LoadCompileRequest("examples/no_such_chain.json");
  ASSERT_FALSE(req.ok());
  EXPECT_EQ(req.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(std::string(req.status().message()),
              HasSubstr("examples/no_such_chain.json"));
}

TEST(JsonTest, WritingIntoAMissingDirectoryIsNotFoundNotPermission) {
  const std::string path = ::testing::TempDir() + "/no_such_dir_kfuse/plan.pb";
  absl::Status s = WriteFile(path, "x");
  EXPECT_EQ(s.code(), absl::StatusCode::kNotFound) << s;
  EXPECT_THAT(std::string(s.message()), HasSubstr("cannot write " + path + ": No such file"));
  EXPECT_EQ(FileError("f", EACCES).code(), absl::StatusCode::kPermissionDenied);
}

}  // namespace
// An endless input is refused at the cap, not held in memory.
TEST(JsonTest, ReadFileRefusesAnEndlessInput) {
  absl::StatusOr<std::string> text = ReadFile("/dev/zero");
  ASSERT_FALSE(text.ok());
  EXPECT_EQ(text.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(text.status().message()), HasSubstr("/dev/zero: larger than 256 MiB"));
  absl::StatusOr<std::string> empty = ReadFile("/dev/null");
  ASSERT_TRUE(empty.ok()) << empty.status();
  EXPECT_EQ(*empty, "");
}

}  // namespace kfuse::client
