// Every feature of the agent library in one product program (docs/LIBRARY.md quotes it; CI builds it):
// a shared engine, custom actions, a removed built-in, secrets, an approval hook, a structured answer,
// questions to the user, live step events and the run's accounting.
//   example_library MODEL_DIR URL
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <iostream>
#include <string>

#include "agent/agent.h"

namespace sa = surf::agent;

namespace {

// The task, its start page, the hosts it may visit, its step budget and its trace folder.
sa::RunOptions make_run(const char* start_url) {
    sa::RunOptions run;
    run.task =
        "Add the cheapest kettle to the cart, then tell me its name and price. Log in as <secret:user> "
        "with the password <secret:password> if the shop asks.";
    run.start_url = start_url;
    run.allow_domains = {"127.0.0.1", "shop.example"};
    run.max_steps = 20;
    run.trace_dir = "example_library_trace";
    return run;
}

void add_secrets(sa::RunOptions& run) {
    // [secrets] The model writes the placeholders; the browser types the values, on these hosts only.
    const char* password = std::getenv("SHOP_PASSWORD");
    run.secrets = {{"user", {"demo-user", {"shop.example"}}},
                   {"password", {password ? password : "not-set", {"shop.example"}}}};
    // [secrets]
}

void add_custom_actions(sa::RunOptions& run) {
    // [custom] An action of the product's own, a built-in taken away and one performed by the product.
    run.custom_actions.push_back(
        {"add_to_cart", "put an item in the cart by the SKU printed under its price",
         R"({"properties": {"sku": {"type": "string", "minLength": 1}}, "required": ["sku"]})",
         [](const sa::CustomActionCall& call) {
             const std::string sku = call.arguments.at("sku").get<std::string>();
             return "added " + sku + " to the cart (on " + call.url + ")";  // the policy reads this
         }});
    run.removed_actions = {"goto"};
    // A built-in performed by the product: the policy still writes `wait`; the handler decides how.
    run.replaced_actions.push_back({"wait", "", "", [](const sa::CustomActionCall& call) {
                                        const int s = call.arguments.at("seconds").get<int>();
                                        return "waited for the shop's spinner instead of " +
                                               std::to_string(s) + " s";
                                    }});
    // [custom]
}

void add_user_hooks(sa::RunOptions& run) {
    // [approval] Ask before anything is typed; everything else goes ahead.
    run.before_action = [](const sa::ProposedAction& p) {
        if (!std::holds_alternative<sa::WriteAction>(p.action)) return sa::ApprovalDecision::approve();
        std::printf("allow \"%s\" on %s? [y/N] ", p.description.c_str(), p.url.c_str());
        std::string line;
        std::getline(std::cin, line);
        return line == "y" ? sa::ApprovalDecision::approve()
                           : sa::ApprovalDecision::reject("the user said no");
    };
    // [approval]

    // [ask] The policy may ask the user (the ask_human action is offered only with a handler).
    run.ask_human = [](const std::string& question) {
        std::printf("the agent asks: %s\n> ", question.c_str());
        std::string reply;
        std::getline(std::cin, reply);
        return reply;
    };
    // [ask]
}

void print_result(const sa::RunResult& result) {
    // [result]
    std::printf("%s at %s after %d steps\n", sa::run_status_name(result.status), result.final_url.c_str(),
                result.steps);
    if (!result.structured.is_null())
        std::printf("%s costs %.2f\n", result.structured["name"].get<std::string>().c_str(),
                    result.structured["price"].get<double>());
    for (const auto& [role, u] : result.usage)
        std::printf("%-9s %d calls, %lld tokens in, %lld out, %.1f s\n", role.c_str(), u.calls,
                    static_cast<long long>(u.input_tokens), static_cast<long long>(u.output_tokens),
                    u.seconds);
    std::printf("model %.1f s, browser %.1f s, %zu screenshots in %s\n", result.model_seconds,
                result.browser_seconds, result.screenshots.size(), result.trace_dir.c_str());
    // [result]
}

}  // namespace

int main(int argc, char** argv) {
    if (argc < 3) {
        std::fprintf(stderr, "usage: %s MODEL_DIR URL\n", argv[0]);
        return 2;
    }
    try {
        // [config]
        sa::AgentConfig config;
        config.model_dir = argv[1];
        auto agent = sa::Agent::create(config);  // Agent(engine, config) shares one engine between agents
        // [config]

        sa::RunOptions run = make_run(argv[2]);
        add_secrets(run);
        add_custom_actions(run);
        add_user_hooks(run);

        // [structured] The answer as a JSON value of this schema.
        run.answer_schema =
            R"({"type": "object", "properties": {"name": {"type": "string"}, "price": {"type": "number"}},)"
            R"( "required": ["name", "price"]})";
        // [structured]

        // [events]
        const sa::RunResult result = agent->run(run, [](const sa::StepEvent& e) {
            if (e.kind == sa::StepEventKind::kStepStarted)
                std::printf("step %d on %s (%dx%d)\n", e.step, e.url.c_str(),
                            e.screenshot ? e.screenshot->width : 0, e.screenshot ? e.screenshot->height : 0);
            else if (e.kind == sa::StepEventKind::kStep)
                std::printf("  %s -> %s\n", e.description.c_str(), e.outcome.c_str());
        });
        // [events]

        print_result(result);
        return result.status == sa::RunStatus::kAnswered ? 0 : 1;
    } catch (const std::exception& e) {
        std::fprintf(stderr, "error: %s\n", e.what());
        return 3;
    }
}
