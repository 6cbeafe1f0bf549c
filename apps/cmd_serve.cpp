// `surf serve --model DIR`: the OpenAI-compatible HTTP server (apps/serve/, docs/SERVE.md). One engine per
// GPU with --gpus (sessions spread across them, each staying on its GPU). Prints the address it listens
// on, then serves until SIGINT / SIGTERM. Exit codes: 0 stopped, 2 bad usage or model folder, 3 error.
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <mutex>
#include <thread>

#include "apps/cli.h"
#include "apps/load_report.h"
#include "apps/serve/http_server.h"
#include "apps/serve/openai_api.h"
#include "base/error.h"
#include "model/checkpoint/config.h"
#include "model/engine.h"
#include "model/replicas.h"

namespace {

using surf::Error;
using surf::ErrorKind;

volatile std::sig_atomic_t g_stop = 0;
void on_signal(int) {
    g_stop = 1;
}

std::vector<int> parse_gpus(const std::string& text) {
    std::vector<int> out;
    size_t at = 0;
    while (at <= text.size()) {
        const size_t comma = text.find(',', at);
        const std::string item = text.substr(at, comma == std::string::npos ? std::string::npos : comma - at);
        try {
            size_t used = 0;
            const int v = std::stoi(item, &used);
            if (used != item.size() || v < 0) throw std::invalid_argument(item);
            for (int g : out)
                if (g == v) throw std::invalid_argument(item);
            out.push_back(v);
        } catch (const std::exception&) {
            throw Error(ErrorKind::kInvalidArgument,
                        "--gpus \"" + text + "\": expected distinct device numbers, e.g. 0,1 (bad item \"" +
                            item + "\")");
        }
        if (comma == std::string::npos) break;
        at = comma + 1;
    }
    return out;
}

std::shared_ptr<surf::model::Engine> open_engines(const std::string& dir, const std::string& backend,
                                                  const std::string& gpus, int cpu_replicas,
                                                  const surf::model::EngineOptions& options) {
    std::vector<std::shared_ptr<surf::model::Engine>> engines;
    if (backend == "cpu") {
        if (!gpus.empty()) throw Error(ErrorKind::kInvalidArgument, "--gpus needs --backend cuda");
        for (int i = 0; i < cpu_replicas; ++i) engines.push_back(surf::model::open_cpu_engine(dir, options));
    } else {
        // cuda on each listed GPU (default 0); any other name gets open_engine's error.
        for (int device : backend == "cuda" && !gpus.empty() ? parse_gpus(gpus) : std::vector<int>{0}) {
            if (backend == "cuda") std::fprintf(stderr, "loading %s on cuda:%d ...\n", dir.c_str(), device);
            engines.push_back(surf::model::open_engine(dir, backend, "--backend", device,
                                                       surf::model::WarmUp::kServing, options));
        }
    }
    if (engines.size() == 1) return engines[0];
    return std::make_shared<surf::model::ReplicaEngine>(std::move(engines));
}

// The access log's sink: "-" = stderr, "off" = none, else a file appended to. Lines from concurrent
// requests never interleave.
std::function<void(const std::string&)> access_log(const std::string& where) {
    if (where == "off") return nullptr;
    // The file closes with the last copy of the sink (the service's), stderr never.
    std::shared_ptr<FILE> out(stderr, [](FILE*) {});
    if (where != "-") {
        FILE* f = std::fopen(where.c_str(), "a");
        if (!f) throw Error(ErrorKind::kIo, "--access-log: cannot open " + where + " for appending");
        out.reset(f, [](FILE* file) { std::fclose(file); });
    }
    auto mutex = std::make_shared<std::mutex>();
    return [out, mutex](const std::string& line) {
        std::lock_guard<std::mutex> lock(*mutex);
        std::fprintf(out.get(), "%s\n", line.c_str());
        std::fflush(out.get());
    };
}

int serve(const surf::cli::Args& args) {
    const std::string dir = surf::cli::model_flag(args);
    if (!std::filesystem::is_directory(dir)) {
        throw Error(ErrorKind::kIo,
                    "--model " + dir + ": not a folder (surf serve loads a local checkpoint)");
    }
    const long long replicas = args.get_int("replicas", 1, 1, 64);
    if (replicas > 1 && args.get("backend", "cpu") != "cpu") {
        throw Error(ErrorKind::kInvalidArgument, "--replicas is for the cpu backend; use --gpus with cuda");
    }
    surf::model::EngineOptions engine_options;
    engine_options.quantize = surf::model::parse_quantize(args.get("quantize", "none"), "--quantize");

    surf::serve::ServiceOptions so;
    so.model_name = args.get("model-name");
    if (so.model_name.empty())
        so.model_name = std::filesystem::path(dir).lexically_normal().filename().string();
    if (so.model_name.empty())
        so.model_name = std::filesystem::path(dir).lexically_normal().parent_path().filename().string();
    so.api_key = args.get("api-key");
    if (so.api_key.empty()) {
        if (const char* env = std::getenv("SURF_API_KEY")) so.api_key = env;
    }
    so.default_max_tokens = static_cast<int32_t>(args.get_int("default-max-tokens", 512, 1, 1 << 20));
    so.max_tokens_limit = static_cast<int32_t>(args.get_int("max-tokens-limit", 8192, 1, 1 << 20));
    // By default a prompt may be as long as the model's context (config.json max_position_embeddings).
    so.max_prompt_tokens = args.get_int(
        "max-prompt-tokens", surf::model::load_model_config(dir).llm.max_position_embeddings, 0, 1 << 24);
    so.max_images = static_cast<int>(args.get_int("max-images", 16, 0, 256));
    so.max_image_pixels =
        args.get_int("max-image-pixels", so.max_image_pixels, 1, surf::model::kMaxImagePixels);
    so.max_request_pixels =
        args.get_int("max-request-pixels", so.max_request_pixels, 1, 64 * surf::model::kMaxImagePixels);
    const int64_t prefix_cache = args.get_int("prefix-cache", 0, 0, 4096);
    so.prefix_cache_sessions = static_cast<size_t>(prefix_cache);
    so.access_log = access_log(args.get("access-log", "-"));
    if (so.default_max_tokens < 1 || so.max_tokens_limit < so.default_max_tokens) {
        throw Error(ErrorKind::kInvalidArgument, "--default-max-tokens must be in [1, --max-tokens-limit]");
    }

    surf::serve::HttpServerOptions ho;
    ho.host = args.get("host", "127.0.0.1");
    const long long port = args.get_int("port", 8000, 0, 65535);
    ho.port = static_cast<int>(port);
    ho.threads = static_cast<int>(args.get_int("threads", 64, 1, 1024));
    const double max_body_mb = args.get_double("max-body-mb", 32, 0.001, 1024);
    ho.max_body_bytes = static_cast<size_t>(max_body_mb * (1 << 20));
    so.max_image_bytes = std::min<size_t>(ho.max_body_bytes, so.max_image_bytes);

    std::fprintf(stderr, "loading %s ...\n", dir.c_str());
    const auto load_start = std::chrono::steady_clock::now();
    std::shared_ptr<surf::model::Engine> engine = open_engines(
        dir, args.get("backend", "cpu"), args.get("gpus"), static_cast<int>(replicas), engine_options);
    surf::cli::print_loaded(dir, *engine, load_start);
    auto service = std::make_shared<surf::serve::OpenAiService>(engine, so);
    surf::serve::HttpServer server(
        ho, [service](const surf::serve::HttpRequest& r, surf::serve::HttpResponseWriter& w) {
            service->handle(r, w);
        });
    service->set_queue_probe([&server] { return server.queue_depth(); });

    std::signal(SIGINT, on_signal);
    std::signal(SIGTERM, on_signal);
    std::signal(SIGPIPE, SIG_IGN);
    server.start();
    const bool v6 = ho.host.find(':') != std::string::npos;
    std::printf("surf serve: listening on http://%s%s%s:%d/v1 (model \"%s\", backend %s%s)\n", v6 ? "[" : "",
                ho.host.c_str(), v6 ? "]" : "", server.port(), so.model_name.c_str(),
                engine->backend_name().c_str(), so.api_key.empty() ? "" : ", API key required");
    std::fflush(stdout);
    while (!g_stop) std::this_thread::sleep_for(std::chrono::milliseconds(100));
    std::fprintf(stderr, "surf serve: stopping\n");
    server.stop();
    return 0;
}

SURF_COMMAND(surf::cli::Command{
    "serve",
    "OpenAI-compatible HTTP server: /v1/chat/completions (streaming, images, json_schema), /v1/models, "
    "/health, /metrics.",
    "--model DIR [--host 127.0.0.1] [--port 8000] [--api-key K] [--backend cpu|cuda] [--gpus 0,1,...] "
    "[flags]",
    {{"model", "DIR",
      "model folder (config.json, safetensors, tokenizer files; default $SURF_MODEL, else the shipped "
      "surf-tiny)"},
     {"model-name", "NAME", "the model id clients send (default: the folder's name)"},
     {"host", "ADDR", "address to bind (default 127.0.0.1; 0.0.0.0 exposes the server to the network)"},
     {"port", "P", "TCP port (default 8000; 0 picks a free one)"},
     {"api-key", "K", "require \"Authorization: Bearer K\" (default $SURF_API_KEY; none if unset)"},
     {"backend", "NAME", "cpu (default) or cuda"},
     {"quantize", "none|fp8",
      "fp8: E4M3 weights and activations in the language model's linear layers, quantized on load (cpu "
      "backend; default none)"},
     {"gpus", "LIST", "cuda: one engine per listed GPU, e.g. 0,1 (default 0)"},
     {"replicas", "N", "cpu: N engines in the process (testing the replica spreading; default 1)"},
     {"threads", "N", "requests handled at once (default 64; more wait in a queue)"},
     {"max-body-mb", "MB", "largest request body (default 32)"},
     {"access-log", "PATH",
      "one line per request (peer, method, path, status, prompt and completion tokens, seconds): - = stderr "
      "(default), off, or a file to append to"},
     {"default-max-tokens", "N", "max_tokens when a request gives none (default 512)"},
     {"max-tokens-limit", "N", "largest max_tokens a request may ask for (default 8192)"},
     {"max-prompt-tokens", "N",
      "largest prompt in text tokens; 0 = no limit (default: the model's max_position_embeddings)"},
     {"max-images", "N", "image parts per request (default 16)"},
     {"max-image-pixels", "N",
      "width x height of one image, checked before decoding (default 16777216 = 4096^2)"},
     {"max-request-pixels", "N", "pixels of all a request's images together (default 67108864)"},
     {"prefix-cache", "N",
      "conversation reuse: engine sessions kept at the end of recent prompts, so a request whose prompt "
      "extends one "
      "prefills only its new part; pays a copy of the state and KV per request on the CUDA engine, so set N "
      "to at least "
      "the conversations in flight (default 0 = off)"}},
    serve});

}  // namespace
