// The page's element list (tools/browser/page_elements.h) on a local page in real Chromium: what is listed,
// with which description, state and box, and what is left out.
#include <doctest/doctest.h>

#include <algorithm>

#include "tests/browser/test_http_server.h"
#include "tools/browser/browser.h"
#include "tools/browser/browser_session.h"
#include "tools/browser/page_elements.h"

using namespace surf;
using namespace surf::tools;

namespace {

const PageElement* find(const std::vector<PageElement>& list, const std::string& description) {
    const auto it = std::find_if(list.begin(), list.end(),
                                 [&](const PageElement& e) { return e.description == description; });
    return it == list.end() ? nullptr : &*it;
}

}  // namespace

TEST_CASE("the element list names each visible element with its state and its box in CSS pixels") {
    test::TestHttpServer server{std::string(SURF_SOURCE_DIR) + "/tests/browser/pages"};
    std::shared_ptr<Browser> browser = Browser::launch({});
    auto session = browser->new_session();
    REQUIRE(session->navigate(server.url("/elements.html")).ok());
    const std::vector<PageElement> list = page_elements(*session);

    const PageElement* user = find(list, "the \"User name\" field");
    REQUIRE(user);
    CHECK(user->state == "value \"ada\"");
    CHECK(user->control);
    CHECK(user->x == doctest::Approx(140).epsilon(0.02));
    CHECK(user->y == doctest::Approx(56).epsilon(0.02));
    CHECK(user->width >= 160);

    const PageElement* pw = find(list, "the \"Password\" field");
    REQUIRE(pw);
    CHECK(pw->state == "filled");  // never the value
    for (const PageElement& e : list) CHECK(e.description.find("hunter22") == std::string::npos);

    REQUIRE(find(list, "the checkbox next to \"Newsletter\""));
    CHECK(find(list, "the checkbox next to \"Newsletter\"")->state == "checked");
    REQUIRE(find(list, "the checkbox next to \"Offers\""));
    CHECK(find(list, "the checkbox next to \"Offers\"")->state == "not checked");
    REQUIRE(find(list, "the \"City\" dropdown"));
    CHECK(find(list, "the \"City\" dropdown")->state == "chosen \"Lyon\"");

    const PageElement* sign_in = find(list, "the \"Sign in\" button");
    REQUIRE(sign_in);
    CHECK(sign_in->x + sign_in->width / 2 == doctest::Approx(70));
    CHECK(sign_in->y + sign_in->height / 2 == doctest::Approx(265));
    REQUIRE(find(list, "the \"Help\" link"));
    REQUIRE(find(list, "the \"Account\" heading"));
    CHECK_FALSE(find(list, "the \"Account\" heading")->control);
    REQUIRE(find(list, "the text \"Price: 24.99 EUR\""));
    // Text mixed with inline elements is one line and its parts are not listed again; text around a link
    // leaves the link its own line.
    REQUIRE(find(list, "the text \"Blue kettle: 25 EUR\""));
    CHECK_FALSE(find(list, "the text \"25 EUR\""));
    REQUIRE(find(list, "the \"terms\" link"));
    CHECK_FALSE(find(list, "the text \"Read the terms first\""));
    // In a table, a control without a label, or whose description repeats, names its row.
    REQUIRE(find(list, "the checkbox in the \"Sunridge Scarf\" row"));
    CHECK(find(list, "the checkbox in the \"Sunridge Scarf\" row")->state == "checked");
    REQUIRE(find(list, "the checkbox in the \"Onyx Knife Set\" row"));
    CHECK(find(list, "the checkbox in the \"Onyx Knife Set\" row")->state == "not checked");
    REQUIRE(find(list, "the \"Add to cart\" button in the \"Onyx Knife Set\" row"));
    REQUIRE(find(list, "the \"Add to cart\" button in the \"Sunridge Scarf\" row"));
    CHECK_FALSE(find(list, "the \"Add to cart\" button"));

    // A checkbox drawn by the page (its input invisible) is listed with its label's box; a long label is
    // named by its first line.
    const PageElement* dark = find(list, "the checkbox next to \"Dark mode\"");
    REQUIRE(dark);
    CHECK(dark->state == "checked");
    CHECK(dark->x == doctest::Approx(420).epsilon(0.02));
    CHECK(dark->width >= 200);
    REQUIRE(find(list, "the \"Large\" radio button"));
    CHECK(find(list, "the \"Large\" radio button")->state == "not checked");
    REQUIRE(find(list, "the checkbox next to \"Partner news\""));
    CHECK(find(list, "the checkbox next to \"Partner news\"")->state == "not checked");

    CHECK_FALSE(find(list, "the \"Hidden\" button"));     // visibility: hidden
    CHECK_FALSE(find(list, "the \"Far below\" button"));  // outside the viewport
    CHECK_FALSE(find(list, "the \"Covered\" button"));    // under another element

    // Document order: the heading comes before the fields, the fields before the button.
    const auto index = [&](const std::string& d) { return find(list, d) - list.data(); };
    CHECK(index("the \"Account\" heading") < index("the \"User name\" field"));
    CHECK(index("the \"User name\" field") < index("the \"Sign in\" button"));

    // The list follows the page: a typed value and a tick show in the next one.
    session->evaluate(
        "document.getElementById('user').value = 'grace'; document.getElementById('ads').checked = true");
    const std::vector<PageElement> after = page_elements(*session);
    CHECK(find(after, "the \"User name\" field")->state == "value \"grace\"");
    CHECK(find(after, "the checkbox next to \"Offers\"")->state == "checked");
    // A click at the listed centre of a page-drawn checkbox toggles it (the agent clicks there).
    session->click(dark->x + dark->width / 2, dark->y + dark->height / 2);
    CHECK(find(page_elements(*session), "the checkbox next to \"Dark mode\"")->state == "not checked");
    browser->shutdown();
}
