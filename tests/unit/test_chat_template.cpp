// Chat templates: byte-for-byte parity with transformers' apply_chat_template rendering (fixtures from
// tests/reference/make_chat_template_fixture.py) for surf's Nemotron-Nano-v2 VL template and three other
// HF-style templates; loading from a model folder; image placeholder expansion (spec §6.1).
#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>
#include <map>

#include "base/error.h"
#include "model/text/chat_template.h"
#include "tests/test_util.h"

using namespace surf::model;
using surf::Error;
using surf::ErrorKind;
using Json = nlohmann::ordered_json;
namespace fs = std::filesystem;

namespace {

const std::string kFixtures = std::string(SURF_FIXTURES_DIR) + "/chat_template/";
const std::string kOurTemplate =
    std::string(SURF_SOURCE_DIR) + "/prompts/chat_template_nemotron_nano_v2_vl.jinja";

Json load_fixture(const std::string& name) {
    std::ifstream in(kFixtures + name);
    REQUIRE(in.good());
    return Json::parse(in);
}

using surf::test::read_file;

std::string template_path(const std::string& name) {
    return name == "chat_template_nemotron_nano_v2_vl.jinja" ? kOurTemplate : kFixtures + name;
}

// The options the fixture script passed for a conversation.
ChatRenderOptions options_of(const Json& conversation) {
    ChatRenderOptions options;
    options.add_generation_prompt = conversation["add_generation_prompt"];
    if (conversation.contains("tools")) options.tools = conversation["tools"];
    if (conversation.contains("enable_thinking"))
        options.enable_thinking = conversation["enable_thinking"].get<bool>();
    if (conversation.contains("thinking")) options.extra["thinking"] = conversation["thinking"];
    return options;
}

const Json kSpecialTokens = {{"bos_token", "<s>"}, {"eos_token", "</s>"}, {"unk_token", "<unk>"}};

struct TempDir {
    fs::path path;
    explicit TempDir(const std::string& name) : path(fs::temp_directory_path() / ("surf_tmpl_" + name)) {
        fs::remove_all(path);
        fs::create_directories(path);
    }
    ~TempDir() { fs::remove_all(path); }
    void write(const std::string& file, const std::string& text) const { std::ofstream(path / file) << text; }
};

}  // namespace

TEST_CASE("chat templates render byte for byte like transformers") {
    Json conversations = load_fixture("conversations.json");
    Json renders = load_fixture("renders.json");
    REQUIRE(conversations.size() >= 30);
    std::map<std::string, Json> by_name;
    for (const auto& c : conversations) by_name[c["name"]] = c;
    std::map<std::string, ChatTemplate> templates;
    int compared = 0;
    for (const auto& r : renders) {
        std::string template_name = r["template"];
        std::string conversation = r["conversation"];
        CAPTURE(template_name);
        CAPTURE(conversation);
        if (!templates.count(template_name)) {
            templates.emplace(template_name, ChatTemplate(read_file(template_path(template_name)),
                                                          template_name, kSpecialTokens));
        }
        const ChatTemplate& t = templates.at(template_name);
        const Json& c = by_name.at(conversation);
        if (r.contains("error")) {
            std::string python_error = r["error"];
            CAPTURE(python_error);
            CHECK_THROWS_AS(t.render(c["messages"], options_of(c)), Error);
        } else {
            std::string got;
            CHECK_NOTHROW(got = t.render(c["messages"], options_of(c)));
            CHECK(got == r["expected"].get<std::string>());
            ++compared;
        }
    }
    CHECK(templates.size() == 4);
    CHECK(compared >= 120);
}

TEST_CASE("the Nemotron VL template renders the spec §6.2 format") {
    ChatTemplate t = ChatTemplate::from_file(kOurTemplate);
    std::vector<ChatMessage> messages = {
        {"system", std::string("You are a web agent.")},
        {"user",
         std::vector<ChatPart>{{ChatPartKind::kImage, ""}, {ChatPartKind::kText, "Find the login button"}}},
        {"assistant", std::string("<think>It is top right.</think>Top right.")},
        {"user", std::string("Click it")},
    };
    std::string expected =
        "<SPECIAL_10>System\nYou are a web agent.\n"
        "<SPECIAL_11>User\n<image>\nFind the login button\n"
        "<SPECIAL_11>Assistant\nTop right.\n<SPECIAL_12>\n"
        "<SPECIAL_11>User\nClick it\n"
        "<SPECIAL_11>Assistant\n";
    CHECK(t.render(messages) == expected + "<think>\n");
    ChatRenderOptions no_thinking;
    no_thinking.enable_thinking = false;
    CHECK(t.render(messages, no_thinking) == expected + "<think></think>");
    ChatRenderOptions no_prompt;
    no_prompt.add_generation_prompt = false;
    CHECK(t.render(messages, no_prompt) ==
          expected.substr(0, expected.size() - std::string("<SPECIAL_11>Assistant\n").size()));

    // The typed API and the JSON API agree.
    CHECK(t.render(messages_to_json(messages)) == t.render(messages));

    messages[0] = {"system", std::string("/no_think")};
    std::string off = t.render(messages);
    CHECK(off.rfind("<think></think>") == off.size() - std::string("<think></think>").size());
    CHECK(off.find("/no_think") == std::string::npos);
}

TEST_CASE("chat template errors: unknown role and bad parts name the template and line") {
    ChatTemplate t = ChatTemplate::from_file(kOurTemplate);
    try {
        t.render(std::vector<ChatMessage>{{"user", std::string("a")}, {"tool", std::string("b")}});
        FAIL("expected an error");
    } catch (const Error& e) {
        std::string message = e.what();
        CHECK(e.kind() == ErrorKind::kInvalidArgument);
        CHECK(message.find("chat_template_nemotron_nano_v2_vl.jinja:") != std::string::npos);
        CHECK(message.find("Unexpected role 'tool' in message 2") != std::string::npos);
    }
    CHECK_THROWS_AS(t.render(Json::object()), Error);  // messages must be a list
}

TEST_CASE("ChatTemplate::from_model_dir follows transformers' precedence and reads special tokens") {
    TempDir dir("model_dir");
    const std::string bos_template =
        "{{ bos_token }}{% for m in messages %}{{ m.content }}{% endfor %}{{ eos_token }}";
    Json config = {{"bos_token", {{"content", "<s>"}, {"lstrip", false}}},
                   {"eos_token", "</s>"},
                   {"pad_token", nullptr},
                   {"chat_template", bos_template}};
    dir.write("tokenizer_config.json", config.dump());
    std::vector<ChatMessage> messages = {{"user", std::string("hi")}};
    {
        ChatTemplate t = ChatTemplate::from_model_dir(dir.path);
        CHECK(t.render(messages) == "<s>hi</s>");
        CHECK(t.origin().find("tokenizer_config.json") != std::string::npos);
        CHECK(!t.special_tokens().contains("pad_token"));
    }
    dir.write("chat_template.json", Json{{"chat_template", "json:{{ messages[0].content }}"}}.dump());
    CHECK(ChatTemplate::from_model_dir(dir.path).render(messages) == "json:hi");
    dir.write("chat_template.jinja", "jinja:{{ messages[0].content }}{{ bos_token }}\n");
    CHECK(ChatTemplate::from_model_dir(dir.path).render(messages) == "jinja:hi<s>");

    TempDir named("named");
    named.write("tokenizer_config.json",
                Json{{"chat_template",
                      {{{"name", "tool_use"}, {"template", "tools"}},
                       {{"name", "default"}, {"template", "default:{{ add_generation_prompt }}"}}}}}
                    .dump());
    CHECK(ChatTemplate::from_model_dir(named.path).render(messages) == "default:True");
}

TEST_CASE("ChatTemplate::from_model_dir reports missing and malformed files") {
    TempDir empty("empty");
    try {
        ChatTemplate::from_model_dir(empty.path);
        FAIL("expected an error");
    } catch (const Error& e) {
        CHECK(e.kind() == ErrorKind::kConfig);
        CHECK(std::string(e.what()).find(empty.path.string()) != std::string::npos);
    }
    TempDir bad("bad_json");
    bad.write("tokenizer_config.json", "{\"chat_template\": ");
    try {
        ChatTemplate::from_model_dir(bad.path);
        FAIL("expected an error");
    } catch (const Error& e) {
        CHECK(e.kind() == ErrorKind::kFormat);
        CHECK(std::string(e.what()).find("tokenizer_config.json") != std::string::npos);
    }
    TempDir bad_template("bad_template");
    bad_template.write("chat_template.jinja", "ok\n{% for m in messages %}");
    try {
        ChatTemplate::from_model_dir(bad_template.path);
        FAIL("expected an error");
    } catch (const Error& e) {
        CHECK(e.kind() == ErrorKind::kFormat);
        CHECK(std::string(e.what()).find("chat_template.jinja:2:") != std::string::npos);
    }
    CHECK_THROWS_AS(ChatTemplate::from_model_dir(empty.path / "nope"), Error);
    CHECK_THROWS_AS(ChatTemplate::from_file(empty.path / "nope.jinja"), Error);
}

TEST_CASE("image placeholders expand to <img> + <image> x tokens + </img>") {
    CHECK(image_token_count(1) == 256);
    CHECK(image_token_count(7) == 1792);
    CHECK_THROWS_AS(image_token_count(0), Error);

    std::vector<int> counts = {2, 3};
    CHECK(expand_image_placeholders("a<image>\nb <image>c", counts) ==
          "a<img><image><image></img>\nb <img><image><image><image></img>c");
    CHECK(expand_image_placeholders("no images", std::vector<int>{}) == "no images");

    std::string one = expand_image_placeholders("<image>", std::vector<int>{image_token_count(9)});
    size_t n = 0;
    for (size_t at = one.find("<image>"); at != std::string::npos; at = one.find("<image>", at + 1)) ++n;
    CHECK(n == 2304);
    CHECK(one.rfind("<img>", 0) == 0);
    CHECK(one.size() == std::string("<img></img>").size() + 2304 * std::string("<image>").size());

    try {
        expand_image_placeholders("<image> and <image>", std::vector<int>{256});
        FAIL("expected an error");
    } catch (const Error& e) {
        CHECK(e.kind() == ErrorKind::kInvalidArgument);
        CHECK(std::string(e.what()).find("2 image placeholder(s)") != std::string::npos);
        CHECK(std::string(e.what()).find("1 image token count(s)") != std::string::npos);
    }
    CHECK_THROWS_AS(expand_image_placeholders("text", std::vector<int>{256}), Error);
    CHECK_THROWS_AS(expand_image_placeholders("<image>", std::vector<int>{0}), Error);

    // End to end: render with the VL template, then expand.
    ChatTemplate t = ChatTemplate::from_file(kOurTemplate);
    std::vector<ChatMessage> messages = {{"user", std::vector<ChatPart>{{ChatPartKind::kImage, ""},
                                                                        {ChatPartKind::kImage, ""},
                                                                        {ChatPartKind::kText, "Compare"}}}};
    std::string prompt = expand_image_placeholders(t.render(messages), std::vector<int>{1, 2});
    CHECK(prompt ==
          "<SPECIAL_10>System\n\n<SPECIAL_11>User\n<img><image></img>\n<img><image><image></img>\nCompare\n"
          "<SPECIAL_11>Assistant\n<think>\n");
}
