"""The cases of scripts/bench/updates.py: facts a person's life changes, and facts it does not.

Each subject is something a person's memory holds one current value of (where they live, who
they work for, their partner, their car...). Its `old` fact is what was stored, under the key a
model once chose. Its cases are what the person says later:
- U: an update. The old value is no longer true. The new fact's key is how a model would
  write it this time: often another key than the old one, and in other words.
- N: not an update. Related to the subject (a visit, a wish, a fact about someone else, one
  more of something), and the old fact must stay current. One more of something gets a key
  of its own, as the `memory` tool's description asks (a key holds one value at a time).
`said` is the person's line, as the encoder reads it in a window of other talk; `passing` marks
a line where it is said only in passing, inside talk about something else: a turn would not
call the memory tool for it, so such a case runs through the encoder only (what is kept of it
is the window's episode, and the fact the encoder reads from it). A case with `later` set was
said months after the old fact (another session); the others in the same week.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Case:
    subject: str
    key: str
    value: str
    said: str
    update: bool
    passing: bool = False
    later: bool = True


@dataclass(frozen=True)
class Subject:
    name: str
    old: tuple[str, str]
    cases: tuple[Case, ...]


def U(key: str, value: str, said: str, *, passing: bool = False,
      later: bool = True) -> tuple[str, str, str, bool, bool, bool]:
    return (key, value, said, True, passing, later)


def N(key: str, value: str, said: str, *, passing: bool = False,
      later: bool = True) -> tuple[str, str, str, bool, bool, bool]:
    return (key, value, said, False, passing, later)


_RAW: list[tuple[str, tuple[str, str], list[tuple[str, str, str, bool, bool, bool]]]] = [
    ("home", ("home", "Lisbon"), [
        N("holiday home", "a cottage in Porto", "We rented a cottage in Porto for August."),
        U("residence", "Porto", "Our Lisbon flat is sold; Porto is home now.", later=False),
        U("city", "Porto", "We finally moved to Porto last month."),
        U("lives in", "Porto, since the spring",
          "Since we moved up to Porto in spring my commute is half what it was.", passing=True),
        U("home city", "Porto", "Lisbon is behind us now, we live in Porto.", later=False),
        N("visited", "Porto", "I visited Porto last weekend, lovely city."),
        N("favorite city", "Porto", "Porto is honestly my favourite city to visit."),
    ]),
    ("address", ("address", "12 Rua Augusta, Lisbon"), [
        N("parents' address", "Rua do Sol 3, Coimbra",
          "My parents' address is Rua do Sol 3, Coimbra."),
        U("home address", "Rua das Flores 40, Porto",
          "My new address is Rua das Flores 40, Porto."),
        U("street", "Rua das Flores", "The movers left everything at our new place on Rua das "
          "Flores, what a mess.", passing=True),
        N("work address", "Avenida da Liberdade 100",
          "Our office is at Avenida da Liberdade 100."),
    ]),
    ("employer", ("employer", "Acme Corp"), [
        N("side project", "a bakery website",
          "On weekends I build a website for a bakery.", passing=True),
        U("workplace", "unemployed, between jobs",
          "Acme let me go on Friday, so I'm job hunting."),
        U("job", "engineer at Globex", "I started at Globex as an engineer on Monday."),
        U("works at", "Globex", "I left Acme, I'm at Globex now.", later=False),
        U("company", "Initech", "Since joining Initech I barely have time for lunch.",
          passing=True),
        N("previous employer", "Umbrella Ltd", "Before Acme I worked at Umbrella for two "
          "years."),
        N("client", "Globex", "We signed Globex as a client this week, big win."),
    ]),
    ("job title", ("job title", "junior developer"), [
        N("colleague's title", "senior developer",
          "My colleague Pedro got promoted to senior developer."),
        U("role", "senior developer", "I got promoted to senior developer!"),
        U("position", "team lead", "Being team lead now means many more meetings.",
          passing=True),
        N("career goal", "become an architect", "Someday I'd like to become a software "
          "architect."),
    ]),
    ("partner", ("partner", "Sam"), [
        N("ex", "Jordan", "I ran into my ex, Jordan, at the market."),
        U("boyfriend", "Leo",
          "Leo and I have been together three months now, he's great.", passing=True),
        U("relationship", "single", "Sam and I broke up in March, I'm single now."),
        U("girlfriend", "Maya", "My girlfriend Maya is coming to dinner."),
        U("spouse", "Sam", "Sam and I got married in June!", later=False),
        N("best friend", "Alex", "My best friend Alex is visiting."),
        N("partner's job", "nurse", "Sam works nights as a nurse this month."),
    ]),
    ("marital status", ("marital status", "engaged"), [
        N("engagement ring", "sapphire", "The engagement ring has a sapphire."),
        U("married", "yes, since June", "We got married in June, it was perfect."),
        U("status", "married", "Now that I'm married the paperwork never ends.",
          passing=True),
        N("wedding venue", "a vineyard near Sintra", "The wedding will be at a vineyard near "
          "Sintra."),
    ]),
    ("pet", ("pet", "a dog called Rex"), [
        N("pet food", "grain-free kibble", "Rex only eats grain-free kibble."),
        U("dog", "Max (a new puppy)",
          "Walking the new puppy, Max, at six am is brutal.", passing=True),
        U("dog", "none (Rex died)", "Rex passed away last week. We don't have a dog anymore."),
        U("pets", "a cat called Luna", "We gave Rex to my parents and adopted a cat, Luna."),
        N("cat", "Luna", "We also got a cat, Luna, she and Rex get along."),
        N("neighbour's dog", "Bruno", "The neighbour's dog Bruno barks all night."),
    ]),
    ("car", ("car", "a red Toyota Corolla"), [
        N("car colour", "red", "The Corolla's red paint is fading."),
        U("vehicle", "a blue Tesla Model 3", "I sold the Corolla and bought a blue Tesla."),
        U("drives", "an electric Renault Zoe", "Charging the new Zoe at work is free, nice.",
          passing=True),
        U("car", "none, sold it", "I sold my car, I cycle everywhere now.", later=False),
        N("dream car", "a Porsche 911", "One day I'll own a Porsche 911."),
        N("rental car", "a Fiat 500", "We rented a Fiat 500 for the holiday."),
    ]),
    ("phone", ("phone", "iPhone 12"), [
        N("phone case", "a green one", "I bought a green case for my iPhone."),
        U("phone", "iPhone 15", "Upgraded to the iPhone 15 yesterday.", later=False),
        U("smartphone", "Pixel 8", "I switched to a Pixel 8."),
        U("mobile", "Samsung Galaxy S24", "My new Galaxy S24 takes much better photos.",
          passing=True),
        N("work phone", "an old Nokia", "Work gave me an old Nokia for on-call."),
    ]),
    ("gym", ("gym", "FitLife on Main Street"), [
        N("gym buddy", "Carla", "Carla and I go to FitLife together."),
        U("fitness club", "CrossBox", "I cancelled FitLife and joined CrossBox."),
        U("workout", "runs outside, no gym", "I quit the gym, I just run outside now."),
        N("gym class", "spinning on Tuesdays", "I started the spinning class at FitLife on "
          "Tuesdays."),
    ]),
    ("diet", ("diet", "vegetarian"), [
        N("craving", "a burger", "I really crave a burger sometimes, but I resist."),
        U("eating", "vegan", "I've gone fully vegan since January."),
        U("diet", "eats meat again", "I'm eating meat again, vegetarian wasn't for me.",
          later=False),
        U("food rule", "pescatarian", "Now that I eat fish again, sushi nights are back.",
          passing=True),
        N("favorite food", "mushroom risotto", "My favourite dish is mushroom risotto."),
    ]),
    ("allergy", ("allergy", "peanuts"), [
        U("allergies", "none any more (outgrew peanuts)",
          "The allergist says I've outgrown my peanut allergy!"),
        N("cat allergy", "yes", "Turns out I'm also allergic to cats."),
        N("son's allergy", "peanuts", "My son is allergic to peanuts too."),
    ]),
    ("favorite color", ("favorite color", "blue"), [
        U("favourite colour", "green", "Green is my favourite colour these days."),
        U("color preference", "purple", "I've come round to purple, it's my colour now."),
        N("wall color", "grey", "We painted the living room grey."),
    ]),
    ("school", ("university", "University of Lisbon"), [
        N("alma mater", "Lisbon high school", "I went to high school in Lisbon too."),
        U("studies at", "University of Porto", "I transferred to the University of Porto."),
        U("college", "finished, graduated in July", "I graduated in July, no more classes!"),
        N("daughter's school", "St Mary's", "My daughter starts at St Mary's in September."),
    ]),
    ("course", ("studying", "computer science"), [
        U("major", "economics", "I switched my major to economics."),
        U("degree", "mathematics", "The maths degree is much harder than I expected.",
          passing=True),
        N("online course", "Spanish on Duolingo", "I'm doing a Spanish course on Duolingo "
          "too."),
    ]),
    ("doctor", ("doctor", "Dr Silva"), [
        U("doctor", "Dr Costa", "Dr Silva retired, so Dr Costa is my doctor now.", later=False),
        U("gp", "Dr Costa", "I changed GP, I see Dr Costa now."),
        U("physician", "Dr Mendes", "Dr Mendes, my new doctor, says my blood pressure is "
          "fine.", passing=True),
        N("dentist", "Dr Pinto", "My dentist is Dr Pinto."),
        N("doctor's advice", "walk more", "Dr Silva told me to walk more."),
    ]),
    ("dentist", ("dentist", "Dr Pinto"), [
        U("dental clinic", "SmileCare", "I moved to the SmileCare clinic for my teeth."),
        N("orthodontist", "Dr Reis", "My son's orthodontist is Dr Reis."),
    ]),
    ("bank", ("bank", "Millennium"), [
        N("credit card", "Amex", "I use an Amex for travel."),
        U("banks with", "Revolut", "I closed my Millennium account, everything's on "
          "Revolut now."),
        U("main bank", "N26", "My salary goes to N26 since last month."),
        N("mortgage bank", "Santander", "The mortgage is with Santander."),
    ]),
    ("commute", ("commute", "drives to work"), [
        N("partner's commute", "bus", "Sam takes the bus to work."),
        U("goes to work", "by train", "I take the train to work now, no more traffic."),
        U("commute", "works from home", "I work from home full time now.", later=False),
        U("travel to work", "cycles", "Cycling to the office every day made me fitter.",
          passing=True),
        N("commute time", "40 minutes", "The drive takes about 40 minutes."),
    ]),
    ("work schedule", ("work hours", "9 to 5"), [
        U("schedule", "four-day week", "We switched to a four-day week!"),
        U("shift", "night shift", "On night shift now, so I sleep until noon.", passing=True),
        N("meeting day", "Mondays", "Team meetings are on Mondays."),
    ]),
    ("language", ("learning language", "German"), [
        U("language course", "French at the Alliance",
          "French classes at the Alliance start at seven, so no more German evenings.",
          passing=True),
        U("studying language", "Japanese", "I dropped German and started Japanese."),
        N("native language", "Portuguese", "My native language is Portuguese."),
        N("language", "Italian", "I'm also picking up some Italian for the trip."),
    ]),
    ("hobby", ("hobby", "painting"), [
        U("free time", "pottery",
          "These days my free time goes into pottery, painting bores me.", passing=True),
        U("pastime", "rock climbing", "I stopped painting, it's all climbing now."),
        N("second hobby", "gardening", "I've taken up gardening as well."),
        N("painting style", "watercolours", "I mostly paint watercolours."),
    ]),
    ("sport", ("sport", "football"), [
        U("plays", "tennis", "I gave up football after my knee, I play tennis now."),
        U("team sport", "basketball", "Basketball practice ran late again.", passing=True),
        N("favorite team", "Benfica", "I support Benfica."),
    ]),
    ("instrument", ("instrument", "piano"), [
        U("plays instrument", "guitar", "I sold the piano and I'm learning guitar."),
        N("also plays", "violin", "I'm adding violin lessons on Thursdays."),
    ]),
    ("children", ("kids", "one daughter, Ana"), [
        N("Ana's age", "seven", "Ana turned seven."),
        U("children", "two: Ana and baby Tiago", "Baby Tiago was born on Friday! Ana is a big "
          "sister now."),
        U("number of kids", "two", "With two kids now the mornings are chaos.", passing=True),
        N("niece", "Rita", "My niece Rita turns five."),
    ]),
    ("sister", ("sister's city", "Madrid"), [
        U("sister", "lives in Berlin now",
          "Since my sister settled in Berlin we only talk on Sundays.", passing=True),
        U("sister lives in", "London", "My sister moved to London for work."),
        N("sister's job", "architect", "My sister is an architect."),
        N("visited sister", "Madrid, in May", "I visited my sister in Madrid in May."),
    ]),
    ("parents", ("parents live in", "Coimbra"), [
        U("parents' home", "Faro", "My parents retired to Faro."),
        N("parents' anniversary", "12 June", "My parents' anniversary is on 12 June."),
    ]),
    ("laptop", ("laptop", "ThinkPad X1"), [
        N("laptop bag", "a grey backpack", "I carry the ThinkPad in a grey backpack."),
        U("computer", "MacBook Air", "I replaced the ThinkPad with a MacBook Air."),
        N("work laptop", "Dell XPS", "Work issued me a Dell XPS."),
    ]),
    ("operating system", ("os", "Windows"), [
        U("uses", "Linux (Fedora)", "I finally switched to Fedora Linux at home."),
        N("phone os", "Android", "My phone runs Android."),
    ]),
    ("coffee", ("coffee", "espresso, two a day"), [
        U("coffee habit", "one cup a day", "I cut down to one coffee a day.", later=False),
        U("caffeine", "quit coffee, drinks tea", "I quit coffee, it's green tea now."),
        N("coffee shop", "Café Central", "Café Central does the best espresso."),
    ]),
    ("sleep", ("bedtime", "midnight"), [
        N("kids' bedtime", "8 pm", "The kids go to bed at eight."),
        U("goes to bed", "10 pm", "I go to bed at ten now, I feel so much better."),
        N("sleep tracker", "Oura ring", "I track my sleep with an Oura ring."),
    ]),
    ("music", ("favorite band", "Radiohead"), [
        N("band practice", "Tuesdays", "My own band practises on Tuesdays."),
        U("favourite music", "jazz, Coltrane", "Lately I only listen to jazz, Coltrane "
          "mostly."),
        N("concert", "Radiohead in July", "I have tickets for Radiohead in July!"),
    ]),
    ("book", ("reading", "Dune"), [
        N("book club", "Thursdays at the library",
          "Book club meets on Thursdays at the library."),
        U("current book", "The Left Hand of Darkness", "Finished Dune, now reading The Left "
          "Hand of Darkness."),
        N("favorite author", "Ursula K. Le Guin", "Le Guin is my favourite author."),
    ]),
    ("weight goal", ("goal weight", "75 kg"), [
        U("target weight", "70 kg", "New target: 70 kg by summer."),
        N("current weight", "80 kg", "I weigh 80 kg today."),
    ]),
    ("running", ("running goal", "10k race"), [
        U("race goal", "a full marathon in Berlin",
          "Signed up for the Berlin marathon in September!", later=False),
        U("training for", "a half marathon", "The 10k went well, now training for a half "
          "marathon."),
        N("running shoes", "Asics Nimbus", "I run in Asics Nimbus."),
    ]),
    ("insurance", ("health insurance", "Médis"), [
        N("travel insurance", "World Nomads", "I bought travel insurance from World Nomads."),
        U("insurer", "Allianz", "I moved my health insurance to Allianz."),
        N("car insurance", "Fidelidade", "The car is insured with Fidelidade."),
    ]),
    ("internet", ("internet provider", "MEO"), [
        U("isp", "NOS fibre", "We switched to NOS fibre, much faster."),
        N("wifi password", "on the router sticker", "The wifi password is on the router."),
    ]),
    ("landlord", ("landlord", "Mr Ferreira"), [
        U("rents from", "Mrs Almeida", "We moved flats; our new landlady is Mrs Almeida."),
        U("housing", "owns the flat now", "We bought our flat, no more landlord!"),
        N("building manager", "Dona Rosa", "Dona Rosa manages the building."),
    ]),
    ("therapist", ("therapist", "Dr Lopes"), [
        U("counsellor", "none, finished therapy", "I finished therapy with Dr Lopes, "
          "feeling good."),
        N("therapy day", "Wednesdays", "Therapy is on Wednesdays."),
    ]),
    ("medication", ("medication", "ibuprofen for back pain"), [
        N("mother's medication", "insulin", "My mother takes insulin."),
        U("takes", "physio instead of pills", "No more ibuprofen, the physio fixed my back."),
        N("vitamin", "vitamin D", "I take vitamin D in winter."),
    ]),
    ("volunteering", ("volunteers at", "the food bank"), [
        U("volunteer work", "animal shelter", "I volunteer at the animal shelter now instead "
          "of the food bank."),
        N("donates to", "Red Cross", "I donate to the Red Cross every month."),
    ]),
    ("band", ("plays in band", "The Lisbon Lights"), [
        U("band", "left the band", "I left The Lisbon Lights, too many gigs."),
        N("bandmate", "Rui", "Rui from the band got married."),
    ]),
    ("shoe size", ("shoe size", "42"), [
        U("shoes", "43 now", "Apparently I'm a 43 now, my feet spread with running."),
        N("son's shoe size", "30", "My son is a size 30."),
    ]),
    ("email", ("email", "joao@oldmail.pt"), [
        N("sister's email", "ines@mail.pt", "My sister's email is ines@mail.pt."),
        U("email address", "joao@newmail.com", "Please use joao@newmail.com from now on."),
        N("work email", "j.silva@acme.com", "My work email is j.silva@acme.com."),
    ]),
    ("nickname", ("preferred name", "Jo"), [
        N("username", "jo_codes", "My username everywhere is jo_codes."),
        U("call me", "João", "Please call me João, not Jo, from now on."),
        N("brother's nickname", "Zé", "Everyone calls my brother Zé."),
    ]),
]


def subjects() -> list[Subject]:
    return [Subject(name, old, tuple(Case(name, *c) for c in cases))
            for name, old, cases in _RAW]


def cases() -> list[Case]:
    return [c for s in subjects() for c in s.cases]
