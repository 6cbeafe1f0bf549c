// What the agent acts on: observe (a screenshot and where it is) and execute typed actions. The loop
// sees only this interface, so it runs against the real browser (BrowserEnvironment) or a scripted page
// in unit tests. Nothing here throws for browser faults: a crash, a timeout or a denied navigation is an
// outcome the policy reads as an observation.
#pragma once

#include <atomic>
#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "agent/actions.h"
#include "agent/coordinates.h"
#include "model/vision/image.h"
#include "tools/browser/page_elements.h"
#include "tools/browser/screenshot.h"

namespace surf::tools {
class BrowserSession;
}

namespace surf::agent {

struct Observation {
    std::shared_ptr<const model::Image> image;  // decoded screenshot (RGB); null if none could be taken
    std::vector<uint8_t> png;                   // the screenshot file, for traces
    ScreenFrame frame;
    std::string url;
    std::string title;
    std::string error;                // why there is no screenshot ("" when there is one)
    std::vector<std::string> events;  // browser events since the last observation
    // The open tabs when there is more than one: "[0] title (url)", the active one marked "(active)".
    std::vector<std::string> tabs;
};

struct ActionOutcome {
    bool ok = true;
    std::string message;     // one line: what happened ("clicked (160, 120)", "navigation denied: ...")
    std::string error_kind;  // surf::ErrorKind name when !ok
};

// Where an action acts, in CSS pixels of the viewport, one entry per action_points() target: `at` for every
// pointed action, `to` as well for an action with a second point.
struct ActionPoints {
    ActionPoints() = default;
    ActionPoints(const tools::CssPoint& at) : at(at) {}  // implicit: most actions have one point
    ActionPoints(const tools::CssPoint& at, const tools::CssPoint& to) : at(at), to(to) {}
    std::optional<tools::CssPoint> at;
    std::optional<tools::CssPoint> to;
};

class Environment {
public:
    virtual ~Environment() = default;
    virtual ActionOutcome open(const std::string& url) = 0;
    virtual Observation observe() = 0;
    // `points` holds what action_points(action) names (required for a pointed action, ignored otherwise).
    virtual ActionOutcome execute(const Action& action, const ActionPoints& points) = 0;
    // The browser tab the environment drives, for custom actions' handlers (null where there is none).
    // Pure, like elements(): a wrapper that forgot to forward it would hide the page without a word.
    virtual tools::BrowserSession* page() = 0;
    // The page's element list (tools/browser/page_elements.h) as the last observe() saw it; the loop asks
    // only when its profile lists elements. Throws Error(kBrowser) when the page does not answer.
    virtual std::vector<tools::PageElement> elements() = 0;
};

struct BrowserEnvironmentOptions {
    double scroll_fraction = 0.8;  // of the viewport per scroll action
    std::chrono::milliseconds max_wait{10000};
    std::chrono::milliseconds after_action{300};  // settle before the next screenshot
    const std::atomic<bool>* cancel = nullptr;    // ends a `wait` action early when set (may be null)
};

class BrowserEnvironment : public Environment {
public:
    BrowserEnvironment(tools::BrowserSession& session, BrowserEnvironmentOptions options = {});
    ActionOutcome open(const std::string& url) override;
    Observation observe() override;
    ActionOutcome execute(const Action& action, const ActionPoints& points) override;
    tools::BrowserSession* page() override { return &session_; }
    std::vector<tools::PageElement> elements() override { return tools::page_elements(session_); }

private:
    ActionOutcome guarded(const std::string& what, const std::function<std::string()>& body);
    // The pointed actions (action_points not empty) and the others; each returns the outcome's message and
    // throws for a failure, which guarded() turns into an outcome.
    std::string act_at(const Action& action, const tools::CssPoint& at,
                       const std::optional<tools::CssPoint>& to);
    std::string act(const Action& action);
    std::string wait(int seconds);
    std::string upload(const UploadAction& action, const tools::CssPoint& at);
    void drain_events(std::vector<std::string>* out);

    tools::BrowserSession& session_;
    BrowserEnvironmentOptions options_;
    std::string last_url_;
    std::vector<std::string> pending_events_;
};

}  // namespace surf::agent
