"""Vocabulary for the surf-tiny task generator: names, products, places, UI labels and filler text.

Every list here is plain data. Generators combine entries (brand + model + product type, first + last
name, verb + object) so that labels on generated pages are diverse.
"""

FIRST_NAMES = """Ana Ben Chloe David Elena Farid Grace Hugo Ines Jonas Keiko Liam Maya Noah Olga Pablo Quinn
Rosa Samir Tara Umar Vera Wei Ximena Yusuf Zoe Amara Bruno Carmen Dmitri Esther Felix Greta Hamza Ingrid
Jorge Kofi Lena Marco Nadia Oscar Priya Rafael Sofia Tomas Uma Viktor Wanda Yara Aiko Bilal Clara Diego
Emma Fatima Gustav Hana Ivan Julia Karim Laura Mateo Nora Omar Paula Ravi Sara Theo Valeria William Yasmin
Alice Arjun Beatriz Caleb Daniela Elif Finn Giulia Henrik Isla Jamal Kenji Leila Mila Nikolai Olivia
Pedro Rania Stefan Tessa Victor Zara Mei Lucas Hannah Adrian Noemi Erik Leon Amelia Sven Lucia""".split()

LAST_NAMES = """Lopez Nguyen Schmidt Okafor Rossi Kowalski Tanaka Haddad Silva Novak Dubois Jensen Patel
Fischer Moreau Costa Ivanova Mensah Larsen Romero Weber Kaur Andersen Bianchi Yilmaz Sato Mueller Garcia
Petrov Fernandes Lindqvist Murphy Kim Chen Akhtar Herrera Vogel Nakamura Brennan Castillo Eriksen Ferreira
Walsh Holm Kovacs Reyes Marino Abdi Sørensen Becker Duarte Lambert Ortiz Wright Baker Clarke Russo Varga
Hughes Keller Morales Suzuki Fontaine Kaplan Olsen Mendes Pereira Jovanovic Hoffmann Laurent Quintero
Brooks Dalton Ellis Foster Gray Hart Irving Jordan Knight Lowe Marsh Nash Owens Price Reed Stone""".split()

CITIES = """Lyon Porto Lisbon Madrid Seville Valencia Bilbao Marseille Toulouse Bordeaux Lille Nantes Nice
Munich Hamburg Cologne Leipzig Dresden Vienna Graz Zurich Geneva Basel Milan Turin Naples Bologna Florence
Prague Brno Krakow Gdansk Warsaw Budapest Ljubljana Zagreb Athens Thessaloniki Dublin Cork Galway Bristol
Leeds Glasgow Edinburgh Cardiff Oslo Bergen Stockholm Malmo Gothenburg Copenhagen Aarhus Helsinki Tampere
Tallinn Riga Vilnius Rotterdam Utrecht Antwerp Ghent Bruges Austin Denver Seattle Portland Boston Chicago
Toronto Montreal Vancouver Calgary Melbourne Adelaide Auckland Osaka Kyoto Seoul Busan Nairobi Accra Lagos
Dakar Tunis Casablanca Istanbul Izmir Tbilisi Yerevan Almaty Mumbai Pune Chennai Hanoi Manila Lima Quito
Bogota Santiago Montevideo Recife Cusco""".split()

COLORS = ["red", "blue", "green", "black", "white", "grey", "yellow", "orange", "pink", "purple",
          "teal", "navy", "beige", "brown", "silver", "olive", "mint", "coral", "cream", "charcoal"]

PRODUCT_TYPES = ["kettle", "toaster", "backpack", "lamp", "mug", "blender", "jacket", "umbrella",
                 "notebook", "headphones", "water bottle", "desk chair", "sneakers", "scarf", "teapot",
                 "frying pan", "wall clock", "speaker", "keyboard", "mouse", "tote bag", "sunglasses",
                 "wallet", "candle", "plant pot", "cutting board", "yoga mat", "thermos", "hoodie",
                 "rain boots", "desk lamp", "pillow", "blanket", "watch", "hair dryer", "coffee grinder",
                 "french press", "bike helmet", "tent", "sleeping bag", "camera bag", "phone case",
                 "laptop stand", "monitor", "vase", "salad bowl", "knife set", "bath towel", "rug", "cap"]

MODEL_WORDS = """Aurora Nordic Breeze Summit Harbor Pixel Vertex Cedar Maple Orbit Luna Terra Nova Atlas
Zephyr Ember Willow Quartz Coral Sierra Tundra Delta Prism Echo Halo Rivera Solace Drift Ridge Meadow Fjord
Canyon Ember Lumen Basalt Juniper Pioneer Comet Horizon Voyager Alpine Cascade Monarch Sable Onyx Ivory
Cobalt Saffron Marina Oasis Vista Glacier Tempo Aria Sol Kestrel Falcon Heron Otter Lynx Bramble""".split()

BRANDS = """Kitchora Lumio Brightwell Northvale Oakhaven Veloce Tidewater Stonebridge Greenfield Hearthly
Bluepeak Silverline Ironwood Fernhill Coastline Amberly Redstone Clearwater Moonbay Sunridge Hollowell
Kestrelworks Urbanist Trailmark Homestead Wavecrest Loomly Brio Fieldcraft Bellmont""".split()

MATERIALS = ["glass", "steel", "ceramic", "bamboo", "leather", "linen", "cotton", "oak", "wool",
             "recycled", "matte", "classic", "compact", "deluxe", "travel", "mini", "pro", "slim"]

SITE_WORDS_A = """North Blue Bright Green Silver Red Golden Swift Clear Urban Open Happy Little Wild Quiet
Bold True Prime Next Fresh Cloud Pixel Paper Stone River Maple Cedar Harbor Summit Lunar Solar""".split()
SITE_WORDS_B = """wind peak field line works hub lab box desk cart nest market studio base craft point way
bay grove press forge mart yard works dock loop path shelf""".split()

DEPARTMENTS = ["Marketing", "Sales", "Engineering", "Finance", "Design", "Support", "Operations",
               "Legal", "Human Resources", "Product", "Research", "Logistics", "Communications",
               "Procurement", "Security", "Data"]

ROLE_PATTERNS = ["Head of {d}", "{d} Manager", "{d} Lead", "Director of {d}", "{d} Coordinator",
                 "{d} Analyst", "{d} Specialist", "{d} Assistant", "VP of {d}", "{d} Intern"]

EVENT_TYPES = ["Jazz concert", "Book reading", "Yoga class", "Wine tasting", "Photography workshop",
               "Startup meetup", "Film screening", "Pottery class", "Chess tournament", "Farmers market",
               "Charity run", "Stand-up comedy night", "Cooking class", "Poetry slam", "Salsa lesson",
               "Board game night", "Science talk", "Open-air cinema", "Craft beer festival",
               "Coding bootcamp", "Art exhibition", "Choir rehearsal", "Language exchange",
               "Vintage market", "Tech conference", "Piano recital", "Gardening workshop",
               "Trivia night", "Museum tour", "Design sprint"]

VENUES = ["City Hall", "The Blue Room", "Riverside Park", "Central Library", "Old Town Square",
          "Harbor Pavilion", "Grand Theatre", "Community Centre", "Botanical Garden", "Art Factory",
          "Union Hall", "Market Hall", "The Loft", "Civic Auditorium", "Station Square", "Lakeside Stage"]

MONTHS = ["January", "February", "March", "April", "May", "June", "July", "August", "September",
          "October", "November", "December"]
WEEKDAYS = ["Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday"]

# UI verbs for buttons; groups of look-alikes make the distractors hard.
BUTTON_GROUPS = [
    ["Save", "Save as", "Save draft", "Save all", "Save and close"],
    ["Export", "Export CSV", "Export PDF", "Import", "Import contacts"],
    ["Delete", "Delete all", "Remove", "Archive", "Restore"],
    ["Send", "Send later", "Resend", "Send invite", "Send feedback"],
    ["Publish", "Unpublish", "Schedule", "Preview", "Request review"],
    ["Apply", "Apply filters", "Reset", "Reset filters", "Clear all"],
    ["Continue", "Continue shopping", "Checkout", "Back", "Skip"],
    ["Upload", "Upload file", "Download", "Download all", "Attach"],
    ["Edit", "Edit profile", "Rename", "Duplicate", "Move"],
    ["Copy link", "Copy", "Share", "Print", "Embed"],
    ["Subscribe", "Unsubscribe", "Follow", "Unfollow", "Mute"],
    ["Approve", "Reject", "Approve all", "Flag", "Escalate"],
    ["Add member", "Invite", "Add guest", "Remove member", "Transfer"],
    ["Refresh", "Sync now", "Retry", "Undo", "Redo"],
    ["Confirm", "Confirm order", "Cancel", "Cancel order", "Keep editing"],
    ["Start trial", "Upgrade", "Downgrade", "Compare plans", "Contact sales"],
    ["Book now", "Reserve", "Check availability", "Join waitlist", "Add to calendar"],
    ["Create project", "New folder", "New file", "Create report", "Create invoice"],
]

LINK_LABELS = ["Pricing", "Careers", "Contact us", "Privacy policy", "Terms of service", "Help center",
               "Blog", "About us", "Press", "Partners", "Investors", "Sitemap", "Accessibility",
               "Cookie settings", "Status", "Developers", "API docs", "Community", "Events",
               "Gift cards", "Shipping info", "Returns", "Track order", "Store locator", "FAQ",
               "Newsroom", "Sustainability", "Affiliates", "Security", "Release notes", "Tutorials",
               "Case studies", "Webinars", "Support", "Documentation", "Changelog", "Brand assets",
               "Our team", "Locations", "Student discount", "Refund policy", "Size guide"]

NAV_LABELS = ["Home", "Products", "Solutions", "Pricing", "Resources", "Company", "Blog", "Docs",
              "Shop", "Deals", "New in", "Collections", "Stories", "Support", "Explore", "Features",
              "Customers", "Learn", "Community", "Contact"]

ARTICLE_TOPICS = ["remote work", "city cycling", "home composting", "sourdough baking", "night trains",
                  "urban gardening", "budget travel", "learning a language", "running a marathon",
                  "small business taxes", "indoor plants", "renewable energy", "minimalist packing",
                  "podcast production", "birdwatching", "photography basics", "saving for retirement",
                  "board game design", "coffee brewing", "digital privacy"]

TAB_SETS = [
    ["Overview", "Details", "Reviews", "Specifications", "Shipping", "Q&A"],
    ["General", "Account", "Security", "Notifications", "Billing", "Integrations", "Advanced"],
    ["Inbox", "Sent", "Drafts", "Archive", "Spam", "Scheduled"],
    ["Summary", "Activity", "Files", "Members", "Settings", "History"],
    ["Today", "This week", "This month", "This year", "All time"],
    ["Profile", "Account settings", "Settings", "Privacy", "Sessions", "API keys"],
    ["Description", "Ingredients", "Nutrition", "Reviews", "Recipes"],
    ["Flights", "Hotels", "Cars", "Packages", "Cruises", "Activities"],
    ["Dashboard", "Reports", "Analytics", "Exports", "Alerts"],
    ["Open", "In progress", "Review", "Done", "Backlog"],
]

CHECKBOX_SETS = [
    ["Email me offers", "Weekly digest", "Product updates", "Event invitations", "Partner news",
     "SMS alerts", "Monthly newsletter", "Security alerts"],
    ["Show online status", "Allow tagging", "Public profile", "Show email address",
     "Allow search engines", "Read receipts", "Share usage data"],
    ["Free shipping", "In stock only", "On sale", "New arrivals", "4 stars & up", "Eco-friendly",
     "Same-day delivery"],
    ["Wi-Fi", "Parking", "Breakfast included", "Pool", "Pet friendly", "Air conditioning", "Gym",
     "Airport shuttle"],
    ["I accept the terms", "Remember this device", "Keep me signed in", "Send a copy to my email",
     "Gift wrap", "Add insurance"],
    ["Auto-play videos", "Dark mode", "Compact view", "Show previews", "Desktop notifications",
     "Sound effects", "Keyboard shortcuts"],
]

RADIO_GROUPS = {
    "Shipping method": ["Standard", "Express", "Next day", "Store pickup"],
    "Payment method": ["Credit card", "PayPal", "Bank transfer", "Cash on delivery"],
    "Size": ["XS", "S", "M", "L", "XL"],
    "Plan": ["Free", "Starter", "Pro", "Team", "Enterprise"],
    "Billing cycle": ["Monthly", "Quarterly", "Yearly"],
    "Email frequency": ["Daily", "Weekly", "Monthly", "Never"],
    "Theme": ["Light", "Dark", "System default"],
    "Seat class": ["Economy", "Premium economy", "Business", "First"],
    "Delivery time": ["Morning", "Afternoon", "Evening"],
    "Contact preference": ["Email", "Phone", "Text message", "No contact"],
    "Room type": ["Single", "Double", "Twin", "Suite"],
    "Difficulty": ["Beginner", "Intermediate", "Advanced", "Expert"],
}

DROPDOWNS = {
    "Country": ["France", "Germany", "Spain", "Portugal", "Italy", "Netherlands", "Belgium", "Austria",
                "Sweden", "Norway", "Poland", "Ireland", "Canada", "Mexico", "Japan"],
    "Language": ["English", "Français", "Deutsch", "Español", "Italiano", "Português", "Nederlands",
                 "Polski", "Svenska"],
    "Sort by": ["Relevance", "Newest first", "Oldest first", "Price: low to high",
                "Price: high to low", "Best rated", "Most popular"],
    "Currency": ["USD", "EUR", "GBP", "CHF", "JPY", "CAD", "SEK"],
    "Time zone": ["UTC", "Europe/Paris", "Europe/London", "America/New_York", "America/Chicago",
                  "Asia/Tokyo", "Australia/Sydney"],
    "Priority": ["Lowest", "Low", "Medium", "High", "Highest", "Urgent"],
    "Status": ["Draft", "In review", "Approved", "Published", "Archived"],
    "Category": ["Books", "Electronics", "Garden", "Kitchen", "Sports", "Toys", "Beauty", "Music"],
    "Department": ["Marketing", "Sales", "Engineering", "Finance", "Design", "Support"],
    "Guests": ["1 guest", "2 guests", "3 guests", "4 guests", "5 guests", "6+ guests"],
    "Date range": ["Last 7 days", "Last 30 days", "Last 90 days", "This year", "All time"],
    "Font size": ["Small", "Medium", "Large", "Extra large"],
}

TEXT_FIELDS = [
    # (label, placeholder, value kind)
    ("Email", "you@example.com", "email"), ("E-mail address", "name@company.com", "email"),
    ("Full name", "Jane Doe", "name"), ("Name", "Your name", "name"), ("City", "e.g. Lyon", "city"),
    ("Company", "Company name", "company"), ("Phone", "+1 555 0100", "phone"),
    ("Coupon code", "Enter code", "code"), ("Promo code", "PROMO", "code"),
    ("Website", "https://", "url"), ("Job title", "e.g. Designer", "job"),
    ("Display name", "Nickname", "handle"), ("Zip code", "12345", "zip"), ("Postcode", "", "zip"),
    ("Order number", "#", "order"), ("Subject", "What is it about?", "subject"),
    ("Team name", "", "company"), ("Project name", "Untitled project", "project"),
    ("Gift message", "Happy birthday!", "message"), ("Referral code", "", "code"),
    ("Tracking number", "", "tracking"), ("Username", "", "handle"), ("Street address", "", "street"),
]

SUBJECTS = ["Question about my order", "Invoice request", "Change of address", "Broken item",
            "Partnership inquiry", "Feedback on the app", "Refund request", "Booking change"]
MESSAGES = ["Thanks for everything!", "Happy birthday, Sam!", "See you soon", "Congratulations!",
            "Enjoy your new home", "With love from Lisbon", "Get well soon"]
STREETS = ["Maple Street", "Harbour Road", "Rue de la Paix", "Calle Mayor", "Bahnhofstrasse",
           "Elm Avenue", "Station Road", "Via Roma", "Park Lane", "Mill Lane"]
JOBS = ["Designer", "Data analyst", "Nurse", "Teacher", "Architect", "Editor", "Barista",
        "Product manager", "Electrician", "Pharmacist"]
PROJECTS = ["Spring launch", "Website refresh", "Q3 budget", "Mobile app", "Annual report",
            "Office move", "Onboarding guide", "Holiday campaign"]

# Menu trees for menu_walk: top level -> second level -> leaves.
MENU_TREES = [
    {"Settings": {"Account": ["Profile", "Password", "Email addresses", "Delete account"],
                  "Privacy": ["Cookies", "Ad preferences", "Blocked users", "Data export"],
                  "Notifications": ["Email", "Push", "SMS", "Quiet hours"],
                  "Appearance": ["Theme", "Font size", "Language"]},
     "Help": {"Guides": ["Getting started", "Keyboard shortcuts", "Troubleshooting"],
              "Contact": ["Live chat", "Email support", "Call us"]},
     "Billing": {"Payment methods": ["Cards", "Bank accounts", "PayPal"],
                 "Invoices": ["2024", "2025", "Download all"],
                 "Plan": ["Current plan", "Upgrade", "Cancel plan"]}},
    {"Products": {"Software": ["Editor", "Analytics", "Backup", "Mail server"],
                  "Hardware": ["Routers", "Switches", "Cameras", "Sensors"],
                  "Services": ["Consulting", "Training", "Support plans"]},
     "Solutions": {"By industry": ["Retail", "Healthcare", "Education", "Finance"],
                   "By size": ["Startups", "Small business", "Enterprise"]},
     "Resources": {"Learn": ["Tutorials", "Webinars", "Case studies"],
                   "Developers": ["API reference", "SDKs", "Status page"]}},
    {"File": {"New": ["Document", "Spreadsheet", "Presentation", "Form"],
              "Open recent": ["Budget 2025", "Trip plan", "Meeting notes"],
              "Export as": ["PDF", "Word", "Plain text", "HTML"]},
     "Edit": {"Find": ["Find and replace", "Find next", "Go to line"],
              "Transform": ["Uppercase", "Lowercase", "Title case"]},
     "View": {"Zoom": ["Zoom in", "Zoom out", "Fit to width"],
              "Panels": ["Outline", "Comments", "History"]}},
    {"Women": {"Clothing": ["Dresses", "Jackets", "Jeans", "Knitwear"],
               "Shoes": ["Sneakers", "Boots", "Sandals"],
               "Accessories": ["Bags", "Scarves", "Jewellery"]},
     "Men": {"Clothing": ["Shirts", "Coats", "Trousers", "Suits"],
             "Shoes": ["Trainers", "Loafers", "Boots"]},
     "Home": {"Kitchen": ["Cookware", "Tableware", "Storage"],
              "Living room": ["Cushions", "Lamps", "Rugs"]}},
    {"Admin": {"Users": ["All users", "Roles", "Invitations", "Groups"],
               "Security": ["Two-factor", "Sessions", "Audit log", "SSO"],
               "Data": ["Backups", "Retention", "Imports"]},
     "Reports": {"Sales": ["Daily", "Monthly", "By region"],
                 "Traffic": ["Sources", "Pages", "Devices"]},
     "Tools": {"Integrations": ["Slack", "Webhooks", "Zapier"],
               "Automation": ["Rules", "Schedules", "Triggers"]}},
]

MENU_TREES += [
    {"Courses": {"Languages": ["Spanish", "Japanese", "German", "Arabic"],
                 "Programming": ["Python", "JavaScript", "SQL", "Rust"],
                 "Design": ["Typography", "Colour theory", "Illustration"]},
     "Community": {"Forums": ["General", "Study groups", "Announcements"],
                   "Events": ["Meetups", "Live classes", "Hackathons"]},
     "My learning": {"Progress": ["Certificates", "Streaks", "Badges"],
                     "Library": ["Saved lessons", "Notes", "Downloads"]}},
    {"Travel": {"Flights": ["One way", "Return", "Multi-city"],
                "Stays": ["Hotels", "Apartments", "Hostels", "Villas"],
                "Extras": ["Car hire", "Airport taxis", "Travel insurance"]},
     "Trips": {"Upcoming": ["Itinerary", "Boarding passes", "Receipts"],
               "Past": ["Reviews", "Invoices", "Photos"]},
     "Support": {"Bookings": ["Change a booking", "Cancel a booking", "Refunds"],
                 "Account": ["Login help", "Payment issues", "Privacy"]}},
    {"Library": {"Books": ["Fiction", "History", "Science", "Poetry"],
                 "Media": ["Films", "Music", "Podcasts"],
                 "Kids": ["Picture books", "Comics", "Homework help"]},
     "Services": {"Membership": ["Join", "Renew", "Lost card"],
                  "Rooms": ["Study rooms", "Meeting rooms", "Makerspace"]},
     "Visit": {"Branches": ["Central", "Northside", "Harbour"],
               "Opening hours": ["Weekdays", "Weekends", "Holidays"]}},
]

TAB_SETS += [
    ["Posts", "Replies", "Media", "Likes", "Highlights"],
    ["Itinerary", "Tickets", "Hotel", "Weather", "Notes"],
    ["Timeline", "Budget", "Risks", "Team", "Documents"],
    ["Orders", "Returns", "Refunds", "Invoices", "Addresses"],
    ["Songs", "Albums", "Artists", "Playlists", "Podcasts"],
]

CHECKBOX_SETS += [
    ["Vegetarian", "Vegan", "Gluten-free", "Nut-free", "Dairy-free", "Halal", "Low sugar"],
    ["Include weekends", "Show holidays", "Week numbers", "Declined events", "Completed tasks", "Time zone labels"],
    ["Open now", "Outdoor seating", "Wheelchair access", "Takes reservations", "Delivery", "Kid friendly"],
]

# Realistic English sentences for filler paragraphs, combined at random.
FILLER_SENTENCES = [
    "Our team reviews every request within two business days.",
    "Prices include VAT where applicable and may change without notice.",
    "We started in a small workshop and now ship to more than forty countries.",
    "Sign up to hear about new arrivals, seasonal sales and events near you.",
    "All orders over fifty dollars ship free within the continental United States.",
    "Read our guide to choosing the right size before you order.",
    "The new release improves performance on older devices and fixes several bugs.",
    "Customers can return unused items within thirty days for a full refund.",
    "This page was last updated after the spring maintenance window.",
    "Members get early access to workshops and a discount on every ticket.",
    "Our support line is open from nine to five, Monday to Friday.",
    "The library will be closed on public holidays.",
    "Every product is tested by our team before it reaches the shelves.",
    "Join thousands of readers who get our weekly newsletter.",
    "The conference brings together designers, engineers and researchers from across Europe.",
    "You can change these preferences at any time from your account page.",
    "Volunteers are always welcome; no experience is needed.",
    "Tickets are non-refundable but can be transferred to a friend.",
    "The museum cafe serves breakfast and lunch using local produce.",
    "Our engineers publish release notes with every update.",
    "Parking is available behind the main building.",
    "Please arrive fifteen minutes before the start of your session.",
    "The city council approved the new cycling lanes last month.",
    "Most questions are answered in our help center.",
    "Shipping times may be longer during the holiday season.",
    "We use cookies to remember your preferences and to understand how the site is used.",
    "Student and senior discounts are available at the box office.",
    "The annual report is available to download as a PDF.",
    "Workshops are limited to twelve participants to keep them personal.",
    "Each plan includes unlimited projects and priority email support.",
    "Our offices are powered by renewable energy.",
    "The trail is well marked and suitable for families.",
    "Orders placed before noon are dispatched the same day.",
    "Reviews are written by verified buyers only.",
    "The team meets every Thursday to plan the next sprint.",
    "Gift cards never expire and can be used online or in store.",
]

HEADLINES = ["Built for teams that move fast", "Everything you need, in one place",
             "Fresh picks for this season", "Plan less, do more", "Simple tools for busy people",
             "Discover what's new", "Your work, beautifully organised", "Made to last",
             "Welcome back", "Find your next favourite", "Smarter shopping starts here",
             "Good design for everyday life", "What's happening this month", "Meet the team"]

AD_TEXTS = ["Get 20% off your first order with code WELCOME20", "Try Pro free for 30 days",
            "Summer sale: up to 50% off selected items", "Download our app for faster checkout",
            "Book your spring getaway today", "New: noise-cancelling earbuds from $49"]
