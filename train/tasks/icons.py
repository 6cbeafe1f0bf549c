"""Inline SVG icons (24x24, stroked) for the well-known icon set that click_icon tasks use."""
import math


def _gear():
    pts = []
    for i in range(16):
        ang = math.pi * 2 * i / 16
        r = 9.5 if i % 2 == 0 else 7.2
        pts.append("%.2f,%.2f" % (12 + r * math.cos(ang), 12 + r * math.sin(ang)))
    return '<polygon points="%s"/><circle cx="12" cy="12" r="3"/>' % " ".join(pts)


def _star():
    pts = []
    for i in range(10):
        ang = -math.pi / 2 + math.pi * i / 5
        r = 9.5 if i % 2 == 0 else 4
        pts.append("%.2f,%.2f" % (12 + r * math.cos(ang), 12.5 + r * math.sin(ang)))
    return '<polygon points="%s"/>' % " ".join(pts)


# name -> (svg inner markup, noun a person would use on a screenshot, functions the task may name)
ICONS = {
    "search": ('<circle cx="11" cy="11" r="7"/><path d="M16.5 16.5L21 21"/>', "magnifying glass",
               ["Search", "Open the search", "Start a search"]),
    "settings": (_gear(), "gear", ["Settings", "Open the settings", "Open the preferences"]),
    "home": ('<path d="M3 11.5L12 4l9 7.5"/><path d="M5.5 10v10h5v-6h3v6h5V10"/>', "house",
             ["Home", "Go to the home page", "Go home"]),
    "cart": ('<path d="M3 4h2.5l2.3 11h10.4L21 7.5H6.4"/><circle cx="9" cy="19.5" r="1.5"/>'
             '<circle cx="17" cy="19.5" r="1.5"/>', "shopping cart",
             ["Cart", "Open the shopping cart", "View your cart"]),
    "delete": ('<path d="M4 7h16M9 7V4h6v3M6 7l1 13h10l1-13M10 11v6M14 11v6"/>', "trash can",
               ["Delete", "Delete the item", "Move it to the trash"]),
    "favorite": ('<path d="M12 20s-7.5-4.6-9.2-9.3A4.6 4.6 0 0 1 12 7.6a4.6 4.6 0 0 1 9.2 3.1C19.5 15.4 12 20 12 20z"/>',
                 "heart", ["Favourite", "Add it to your favourites", "Mark it as a favourite"]),
    "notifications": ('<path d="M6 16.5V11a6 6 0 0 1 12 0v5.5l1.8 1.8H4.2z"/><path d="M10 20.5a2 2 0 0 0 4 0"/>',
                      "bell", ["Notifications", "Open the notifications", "Show your alerts"]),
    "profile": ('<circle cx="12" cy="8" r="4"/><path d="M4 21c0-4.2 3.6-6.5 8-6.5s8 2.3 8 6.5"/>',
                "person", ["Profile", "Open your profile", "Go to your account"]),
    "close": ('<path d="M6 6l12 12M18 6L6 18"/>', "X", ["Close", "Close the panel", "Close this panel"]),
    "add": ('<path d="M12 5v14M5 12h14"/>', "plus", ["Add", "Add a new item", "Create a new entry"]),
    "download": ('<path d="M12 4v11M7 10.5l5 5 5-5M5 20h14"/>', "download arrow",
                 ["Download", "Download the file", "Save a copy to your device"]),
    "share": ('<circle cx="18" cy="5.5" r="2.5"/><circle cx="6" cy="12" r="2.5"/><circle cx="18" cy="18.5" r="2.5"/>'
              '<path d="M8.2 10.8l7.6-4.1M8.2 13.2l7.6 4.1"/>', "share", ["Share", "Share this page", "Share the link"]),
    "edit": ('<path d="M4 20h4L19 9l-4-4L4 16z"/><path d="M13.5 6.5l4 4"/>', "pencil",
             ["Edit", "Edit the item", "Make changes to it"]),
    "menu": ('<path d="M4 6.5h16M4 12h16M4 17.5h16"/>', "hamburger menu",
             ["Menu", "Open the main menu", "Show the navigation menu"]),
    "star": (_star(), "star", ["Star", "Give it a star", "Mark it with a star"]),
}


def svg(name, size=None):
    """Returns the inline <svg> element of icon `name`."""
    inner = ICONS[name][0]
    style = ' style="width:%s;height:%s"' % (size, size) if size else ""
    return ('<svg viewBox="0 0 24 24" aria-hidden="true"%s fill="none" stroke="currentColor" stroke-width="2" '
            'stroke-linecap="round" stroke-linejoin="round">%s</svg>' % (style, inner))
