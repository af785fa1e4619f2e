#!/usr/bin/env python3
"""Generate the "as they come from the real world" CSV files of the
`organic-error` tabular tasks.

Standard library only and deterministic (one `random.Random(seed)` per file,
fixed formatting, explicit encodings and line endings), so running it again
reproduces byte-identical files:

    python3 datasets/tabular/generate_messy.py     # writes datasets/tabular/data/*.csv, *.txt

Each file carries the quirks of real exports: semicolons with decimal commas
and dotted thousands, Latin-1 text, a title row above the header, a two-row
header whose second row repeats column names, trailing total rows, percent and
currency strings, several missing-value markers, identifiers with leading
zeros, mixed date formats and whitespace-aligned columns. All names, places
and values are invented. The clean records behind each file are what the
expected answers were computed from (see datasets/README.md).
"""

import datetime as dt
import os
import random

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "data")

MONTHS = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"]


def put(name, lines, encoding="utf-8"):
    os.makedirs(OUT, exist_ok=True)
    with open(os.path.join(OUT, name), "w", encoding=encoding, newline="") as f:
        f.write("".join(line + "\n" for line in lines))


def eu_number(x, decimals=2):
    """1234.5 -> '1.234,50' (dot thousands, comma decimals)."""
    s = f"{x:,.{decimals}f}"
    return s.replace(",", "_").replace(".", ",").replace("_", ".")


def day(start, rng, span):
    return start + dt.timedelta(days=rng.randint(0, span))


# ------------------------------------------------------------------ shop_orders.csv
EU_PRODUCTS = [
    ("Kaffeemühle Alba", 64.90), ("Wasserkocher Brio", 39.50), ("Espressomaschine Corvo", 1249.00),
    ("Toaster Delta", 45.00), ("Standmixer Elba", 189.95), ("Küchenwaage Fino", 24.99),
    ("Kühlschrank Gardo", 2399.00), ("Mikrowelle Hako", 159.00),
]
EU_STORES = ["Lindau", "Marbach", "Nordheim", "Ostrau"]


def eu_orders():
    rng = random.Random(8101)
    rows = []
    for i in range(1, 641):
        d = day(dt.date(2024, 1, 1), rng, 365)
        store = rng.choice(EU_STORES)
        product, price = rng.choice(EU_PRODUCTS)
        price = round(price * rng.choice([1.0, 1.0, 1.0, 0.95, 0.9]), 2)
        qty = rng.choice([1, 1, 1, 2, 2, 3, 4])
        rows.append((f"B{i:05d}", d, store, product, qty, price, round(qty * price, 2)))
    return rows


def gen_eu_orders():
    lines = ["order_id;order_date;store;product;quantity;unit_price;total"]
    for oid, d, store, product, qty, price, total in eu_orders():
        lines.append(f"{oid};{d:%d.%m.%Y};{store};{product};{qty};{eu_number(price)};{eu_number(total)}")
    put("shop_orders.csv", lines)


# ------------------------------------------------------------------ staff_roster.csv
LATIN_FIRST = ["Anaïs", "Björn", "Çelik", "Dóra", "Élodie", "Fañch", "Gösta", "Hélène", "Iñigo",
               "Jürgen", "Kåre", "Léa", "Mónica", "Nuño", "Øyvind", "Pål", "Renée", "Søren", "Thérèse", "Zoë"]
LATIN_LAST = ["Åberg", "Brönner", "Castaño", "Dürr", "Éclair", "Fößel", "Gómez", "Hählen", "Ibáñez",
              "Jäger", "Kühn", "Løvlie", "Müller", "Núñez", "Öztürk", "Péron", "Quérel", "Röhl", "Säll", "Öberg"]
LATIN_CITIES = ["Münsterau", "Orléac", "São Veral", "Kølby", "Zürichsee", "Béziat"]
LATIN_DEPTS = ["Finance", "Logistics", "Sales", "Support", "Research"]


def staff():
    rng = random.Random(8102)
    rows = []
    for i in range(1, 301):
        name = f"{rng.choice(LATIN_FIRST)} {rng.choice(LATIN_LAST)}"
        city = rng.choice(LATIN_CITIES)
        dept = rng.choice(LATIN_DEPTS)
        salary = rng.randrange(2800, 7400, 25)
        rows.append((f"P{i:04d}", name, city, dept, salary))
    return rows


def gen_staff():
    lines = ["staff_id,name,city,department,monthly_salary"]
    lines += [f"{a},{b},{c},{d},{e}" for a, b, c, d, e in staff()]
    put("staff_roster.csv", lines, encoding="latin-1")


# ------------------------------------------------------------------ warehouse_report.csv
WH_WORDS = ["bolt", "hinge", "bracket", "washer", "gasket", "spring", "clamp", "rivet", "valve", "bearing"]


def warehouse():
    rng = random.Random(8103)
    skus = rng.sample(range(1, 99999), 180)
    rows = []
    for sku in skus:
        desc = f"{rng.choice(['steel', 'brass', 'nylon', 'zinc'])} {rng.choice(WH_WORDS)} {rng.randint(3, 40)}mm"
        loc = rng.choice("ABCDE") + str(rng.randint(1, 9))
        on_hand = rng.randint(0, 900)
        cost = round(rng.uniform(0.05, 38.0), 2)
        rows.append((f"{sku:06d}", desc, loc, on_hand, cost))
    return rows


def gen_warehouse():
    rows = warehouse()
    lines = ["Warehouse stock report,,,,", "Generated 2024-07-01 by StockPilot 4.2,,,,", ",,,,",
             "sku,description,location,on_hand,unit_cost"]
    lines += [f"{s},{d},{loc},{n},{c:.2f}" for s, d, loc, n, c in rows]
    total_units = sum(r[3] for r in rows)
    lines.append(f"TOTAL,,,{total_units},")
    put("warehouse_report.csv", lines)


# ------------------------------------------------------------------ clinic_visits.csv
CLINICS = ["Northside", "Riverside", "Hillcrest"]


def visits():
    rng = random.Random(8104)
    rows = []
    for i in range(1, 901):
        d = day(dt.date(2024, 1, 1), rng, 365)
        patient = f"PT{rng.randint(1, 150):03d}"
        fee = rng.choice([45, 60, 60, 75, 90, 120])
        rows.append((i, patient, d, rng.choice(CLINICS), fee, rng.randrange(3)))
    return rows


def fmt_date(d, style):
    if style == 0:
        return d.isoformat()
    if style == 1:
        return f"{d.day:02d}.{d.month:02d}.{d.year}"
    return f'"{MONTHS[d.month - 1]} {d.day}, {d.year}"'


def gen_visits():
    lines = ["visit_id,patient_id,visit_date,clinic,fee"]
    for vid, patient, d, clinic, fee, style in visits():
        lines.append(f"{vid},{patient},{fmt_date(d, style)},{clinic},{fee}")
    put("clinic_visits.csv", lines)


# ------------------------------------------------------------------ regional_quarters.csv
QREGIONS = ["Aldmoor", "Brisk Vale", "Copperfield", "Dunlow", "Elmstead", "Fernhill", "Gorse Bay",
            "Harrowgate", "Ivydale", "Juniper Coast", "Kestrel Heath", "Lowmarsh"]


def quarters():
    rng = random.Random(8105)
    out = []
    for r in QREGIONS:
        base = rng.randint(800, 4000)
        vals = [round(base * rng.uniform(0.8, 1.3)) for _ in range(8)]
        out.append((r, vals))
    return out


def gen_quarters():
    lines = ["region,2023,,,,2024,,,", "region,Q1,Q2,Q3,Q4,Q1,Q2,Q3,Q4"]
    lines += [r + "," + ",".join(str(v) for v in vals) for r, vals in quarters()]
    put("regional_quarters.csv", lines)


# ------------------------------------------------------------------ survey.csv
SURVEY_REGIONS = ["North", "South", "East", "West"]
MISSING = ["", "NA", "n/a", "-", "?", "unknown", "refused"]


def survey():
    """(respondent_id, age|None, income|None, region, satisfaction|None, postcode)."""
    rng = random.Random(8106)
    rows = []
    for i in range(1, 501):
        age = rng.randint(18, 84) if rng.random() > 0.12 else None
        income = rng.randrange(14000, 140000, 100) if rng.random() > 0.15 else None
        sat = rng.randint(20, 100) if rng.random() > 0.08 else None
        postcode = f"{rng.randint(1000, 99999):05d}"
        rows.append((f"{i:05d}", age, income, rng.choice(SURVEY_REGIONS), sat, postcode))
    return rows


def gen_survey():
    rng = random.Random(81061)
    lines = ["respondent_id,age,income,region,satisfaction,postcode"]
    for rid, age, income, region, sat, pc in survey():
        a = str(age) if age is not None else rng.choice(MISSING)
        inc = f'"{income:,}"' if income is not None else rng.choice(MISSING)
        s = f"{sat}%" if sat is not None else rng.choice(MISSING)
        lines.append(f"{rid},{a},{inc},{region},{s},{pc}")
    put("survey.csv", lines)


# ------------------------------------------------------------------ parts.csv, part_orders.csv
PART_CATS = ["fasteners", "seals", "electrical", "hydraulics", "tools"]


def parts():
    rng = random.Random(8107)
    nums = rng.sample(range(100, 60000), 60)
    return [(f"{n:06d}", rng.choice(PART_CATS), round(rng.uniform(0.4, 85.0), 2)) for n in nums]


def part_orders():
    rng = random.Random(8108)
    cat = parts()
    rows = []
    for i in range(1, 401):
        r = rng.random()
        if r < 0.05:
            part = "UNKNOWN"
        elif r < 0.09:
            part = f"{rng.randint(60001, 99999):06d}"  # not in the catalogue
        else:
            part = rng.choice(cat)[0]
        rows.append((f"PO{i:04d}", part, rng.randint(1, 50)))
    return rows


def gen_parts():
    put("parts.csv", ["part_no,category,unit_price"] + [f"{p},{c},{u:.2f}" for p, c, u in parts()])
    put("part_orders.csv", ["order_no,part_no,quantity"] + [f"{o},{p},{q}" for o, p, q in part_orders()])


# ------------------------------------------------------------------ cities.csv
CITY_A = ["Port", "Lake", "New", "Old", "East", "West", "High", "Low", "Glen", "Fair"]
CITY_B = ["haven", "bridge", "ford", "mouth", "wick", "field", "stead", "minster", "burgh", "cliff"]


def cities():
    rng = random.Random(8109)
    names = rng.sample([a + b for a in CITY_A for b in CITY_B], 70)
    rows = []
    for n in names:
        pop = int(10 ** rng.uniform(4.3, 6.9))
        area = round(rng.uniform(20, 1600), 1)
        rows.append((n, pop, area, rng.randint(1150, 1990)))
    return rows


def gen_cities():
    lines = ["city,population,area_km2,founded"]
    lines += [f'{n},"{p:,}","{a:,.1f}",{f}' for n, p, a, f in cities()]
    put("cities.csv", lines)


# ------------------------------------------------------------------ campaigns.csv
def campaigns():
    rng = random.Random(8110)
    rows = []
    for i in range(1, 61):
        budget = rng.randrange(500, 60000, 50)
        clicks = rng.randint(200, 40000)
        rate = round(rng.uniform(0.4, 9.5), 1)  # percent
        rows.append((f"CMP-{i:03d}", rng.choice(["search", "social", "display", "email"]), budget, clicks, rate))
    return rows


def gen_campaigns():
    lines = ["campaign,channel,budget,clicks,conversion_rate"]
    lines += [f'{c},{ch},"${b:,.2f}","{k:,}",{r:.1f}%' for c, ch, b, k, r in campaigns()]
    put("campaigns.csv", lines)


# ------------------------------------------------------------------ monthly_spend.csv
SPEND_DEPTS = ["IT", "Facilities", "Marketing", "Travel"]


def spend():
    rng = random.Random(8111)
    rows = []
    for y, m in [(2023, m) for m in range(1, 13)] + [(2024, m) for m in range(1, 7)]:
        for dep in SPEND_DEPTS:
            rows.append((f"{y}-{m:02d}", dep, round(rng.uniform(1500, 24000), 2)))
    return rows


def gen_spend():
    rows = spend()
    lines = ["month,department,amount"] + [f"{m},{d},{a:.2f}" for m, d, a in rows]
    for dep in SPEND_DEPTS:
        lines.append(f"Total,{dep},{sum(a for _, d, a in rows if d == dep):.2f}")
    lines.append(f"Total,All,{sum(a for _, _, a in rows):.2f}")
    put("monthly_spend.csv", lines)


# ------------------------------------------------------------------ stations.txt
def stations():
    rng = random.Random(8112)
    rows = []
    for i in range(1, 41):
        name = rng.choice(["Ash", "Birch", "Cedar", "Dove", "Elm", "Fox"]) + rng.choice(["ridge", "moor", "fell", "point"]) + f"_{i:02d}"
        rows.append((f"WS{i:03d}", name, rng.randint(2, 2400), round(rng.uniform(-4.0, 17.0), 1), rng.randint(300, 3200)))
    return rows


def gen_stations():
    lines = [f"{'station':<8}{'name':<18}{'elev_m':>8}{'mean_temp':>11}{'rain_mm':>9}"]
    lines += [f"{s:<8}{n:<18}{e:>8}{t:>11.1f}{r:>9}" for s, n, e, t, r in stations()]
    put("stations.txt", lines)


if __name__ == "__main__":
    gen_eu_orders()
    gen_staff()
    gen_warehouse()
    gen_visits()
    gen_quarters()
    gen_survey()
    gen_parts()
    gen_cities()
    gen_campaigns()
    gen_spend()
    gen_stations()
