// surf generate: one chat turn on a model folder, streamed to stdout, on the CPU engine or the CUDA engine
// (--backend cuda). Renders the conversation with the checkpoint's own chat template (or --template FILE),
// tiles images, and samples. SURF_DUMP=regex (and SURF_DUMP_PATH) dump named intermediates of the CPU
// engine's forward pass.
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <memory>

#include "apps/cli.h"
#include "base/error.h"
#include "model/checkpoint/safetensors.h"
#include "model/dump.h"
#include "model/engine.h"
#include "model/structured/json_schema.h"
#include "model/text/chat_template.h"

namespace {

using namespace surf::model;

// The engine on `backend`: the CPU engine with the SURF_DUMP options, or a registered backend by name (main
// registers cuda in a CUDA build) warmed up for one caller.
std::unique_ptr<Engine> open_generate_engine(const std::string& dir, const std::string& backend,
                                             Quantize quantize) {
    EngineOptions engine_options;
    engine_options.quantize = quantize;
    if (const char* pattern = std::getenv("SURF_DUMP")) {
        engine_options.dump_pattern = pattern;
        if (const char* path = std::getenv("SURF_DUMP_PATH")) engine_options.dump_path = path;
    }
    if (backend == "cpu") return open_cpu_engine(dir, engine_options);
    if (!engine_options.dump_pattern.empty())
        std::fprintf(stderr, "surf generate: SURF_DUMP applies to --backend cpu only; ignored\n");
    engine_options.dump_pattern.clear();
    return open_engine(dir, backend, "--backend", 0, WarmUp::kSingle, engine_options);
}

// Sampling, --max-tokens and --schema.
GenerateOptions generate_options(const surf::cli::Args& args) {
    SamplingParams sampling;
    sampling.temperature = static_cast<float>(args.get_double("temperature", 0.0, 0, 2));
    sampling.top_p = static_cast<float>(args.get_double("top-p", 1.0, 0, 1));
    sampling.top_k = static_cast<int32_t>(args.get_int("top-k", 0, 0, 1 << 20));
    sampling.seed = static_cast<uint64_t>(args.get_int("seed", 0, 0, 9223372036854775807LL));
    validate(sampling);
    GenerateOptions options;
    options.sampling = sampling;
    options.max_tokens = static_cast<int32_t>(args.get_int("max-tokens", 128, 0, 1 << 20));
    if (args.has("schema")) options.schema = load_json_schema_file(args.get("schema"));
    return options;
}

// The prompt: --prompt as given (--raw), or the conversation rendered with the chat template: an optional
// system message, then one user turn with the images first.
std::string generate_prompt(const surf::cli::Args& args, const std::string& dir, size_t n_images) {
    if (args.has("raw")) return args.require("prompt");
    const ChatTemplate tmpl = args.has("template")
                                  ? ChatTemplate::from_file(args.get("template"), std::filesystem::path(dir) /
                                                                                      "tokenizer_config.json")
                                  : ChatTemplate::from_model_dir(dir);
    std::vector<ChatMessage> messages;
    if (args.has("system")) messages.push_back({"system", args.get("system")});
    std::vector<ChatPart> parts;
    for (size_t i = 0; i < n_images; ++i) parts.push_back({ChatPartKind::kImage, ""});
    parts.push_back({ChatPartKind::kText, args.require("prompt")});
    messages.push_back({"user", parts});
    ChatRenderOptions render;
    if (args.has("think")) render.enable_thinking = true;
    if (args.has("no-think")) render.enable_thinking = false;
    return tmpl.render(messages, render);
}

// The timing line on stderr, then the --dump-logits file and the --show-tokens ids.
void report_generation(const surf::cli::Args& args, const Engine& engine, const GenerateResult& result,
                       const std::vector<float>& logit_rows, int64_t logit_vocab) {
    std::fprintf(
        stderr,
        "[%s] prefill %lld tokens (%lld image) in %.3f s; generated %zu tokens in %.3f s (%.1f tok/s); "
        "finish: %s\n",
        engine.backend_name().c_str(), (long long)result.prefill_tokens, (long long)result.image_tokens,
        result.prefill_seconds, result.tokens.size(), result.decode_seconds,
        result.decode_seconds > 0 ? static_cast<double>(result.tokens.size()) / result.decode_seconds : 0.0,
        finish_reason_name(result.finish));
    if (args.has("dump-logits") && logit_vocab > 0) {
        const int64_t rows = static_cast<int64_t>(logit_rows.size()) / logit_vocab;
        write_safetensors(args.get("dump-logits"),
                          {{"logits", DType::kF32, {rows, logit_vocab}, logit_rows.data()}});
        std::fprintf(stderr, "wrote the logits of %lld steps to %s\n", (long long)rows,
                     args.get("dump-logits").c_str());
    }
    if (args.has("show-tokens")) {
        for (int32_t t : result.tokens) std::fprintf(stderr, "%d ", t);
        std::fprintf(stderr, "\n");
    }
}

int run_generate(const surf::cli::Args& args) {
    const std::string backend = surf::cli::backend_flag(args);
    const std::string dir = surf::cli::model_flag(args);
    GenerateOptions options = generate_options(args);

    std::vector<std::shared_ptr<const Image>> images;
    for (const std::string& path : args.all("image"))
        images.push_back(std::make_shared<Image>(load_image(path)));
    const std::string prompt = generate_prompt(args, dir, images.size());

    auto engine =
        open_generate_engine(dir, backend, parse_quantize(args.get("quantize", "none"), "--quantize"));
    std::vector<float> logit_rows;
    int64_t logit_vocab = 0;
    if (args.has("dump-logits")) {
        options.on_logits = [&](const float* logits, int64_t vocab) {
            logit_rows.insert(logit_rows.end(), logits, logits + vocab);
            logit_vocab = vocab;
        };
    }
    const SessionId session = engine->open_session();
    options.on_text = [](std::string_view text) {
        std::fwrite(text.data(), 1, text.size(), stdout);
        std::fflush(stdout);
        return true;
    };
    const GenerateResult result = engine->generate(
        session, interleave_images(prompt, images, engine->config().image_context_token), options);
    std::printf("\n");
    report_generation(args, *engine, result, logit_rows, logit_vocab);
    return 0;
}

SURF_COMMAND(surf::cli::Command{
    "generate",
    "Generate a reply to one prompt (with optional images) on a model folder, streaming the text.",
    "--model DIR --prompt TEXT [--image PATH]... [--backend cpu|cuda] [flags]",
    {{"model", "DIR",
      "model folder (config.json, safetensors, tokenizer.json; default $SURF_MODEL, else the shipped "
      "surf-tiny)"},
     {"backend", "NAME", "cpu (default) or cuda (a build with the CUDA backend; GPU 0)"},
     {"prompt", "TEXT", "the user message"},
     {"image", "PATH", "an image for the user turn (PNG/JPEG)", true},
     {"system", "TEXT", "a system message"},
     {"template", "FILE", "a Jinja chat template to use instead of the checkpoint's"},
     {"raw", "", "send --prompt as-is (already chat-formatted; <image> marks each image)"},
     {"think", "", "enable the reasoning block"},
     {"no-think", "", "disable the reasoning block"},
     {"max-tokens", "N", "tokens to generate at most (default 128)"},
     {"temperature", "T", "0 = greedy (default)"},
     {"top-p", "P", "nucleus sampling mass (default 1)"},
     {"top-k", "K", "keep the K most likely tokens (default off)"},
     {"seed", "S", "sampling seed (default 0)"},
     {"quantize", "none|fp8",
      "fp8: E4M3 weights and activations in the language model's linear layers, quantized on load "
      "(default none)"},
     {"schema", "FILE", "constrain the output to this JSON schema"},
     {"show-tokens", "", "print the generated token ids on stderr"},
     {"dump-logits", "FILE",
      "write the logits each generated token is drawn from to FILE (safetensors, [steps, vocab])"}},
    run_generate});

}  // namespace
