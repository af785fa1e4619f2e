#!/usr/bin/env python3
"""Generate the synthetic CSV files of the `tabular` suite.

Standard library only and fully deterministic: every file has its own
`random.Random(seed)`, numbers are written with fixed formatting and lines end
in "\\n", so running this script again reproduces byte-identical files.

    python3 datasets/tabular/generate.py          # writes datasets/tabular/data/*.csv

All names, places and values are invented.  If you change anything here, re-run
the script and then re-verify the tasks (the expected answers depend on the data).
"""

import csv
import math
import datetime as dt
import os
import random

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "data")

# Invented syllables for person names (no real-world list is used).
FIRST_A = ["Ta", "Mi", "Lo", "Ka", "Re", "Sa", "No", "Ve", "Da", "Jo", "Pe", "Ri", "Ela", "Ori", "Una"]
FIRST_B = ["vin", "ra", "len", "dor", "sa", "mi", "ric", "na", "bel", "tan", "lia", "ko", "ne", "ssa"]
LAST_A = ["Bran", "Cor", "Dell", "Fen", "Gar", "Hol", "Mar", "Nor", "Pell", "Quin", "Ros", "Stav", "Tor", "Wyn"]
LAST_B = ["wick", "ley", "stone", "ford", "mere", "ton", "dale", "by", "croft", "well", "ridge", "holt"]

CITIES = ["Avonmere", "Brackwater", "Colden", "Dunmore", "Eastvale", "Fairhollow", "Greyport", "Halbrook"]


def first_name(rng):
    return rng.choice(FIRST_A) + rng.choice(FIRST_B)


def last_name(rng):
    return rng.choice(LAST_A) + rng.choice(LAST_B)


def write(name, header, rows):
    os.makedirs(OUT, exist_ok=True)
    path = os.path.join(OUT, name)
    with open(path, "w", newline="", encoding="utf-8") as f:
        w = csv.writer(f, lineterminator="\n")
        w.writerow(header)
        w.writerows(rows)
    return path


def rand_date(rng, start, end):
    """A date uniformly between start and end inclusive."""
    return start + dt.timedelta(days=rng.randint(0, (end - start).days))


# --------------------------------------------------------------------------- products
PRODUCTS = [
    # product, category, list price, unit cost, launch date
    ("Aurora Lamp", "Home", 39.90, 21.50, "2019-03-12"),
    ("Breeze Fan", "Home", 54.00, 30.25, "2020-05-02"),
    ("Cobalt Kettle", "Kitchen", 29.50, 14.80, "2018-11-20"),
    ("Drift Mug", "Kitchen", 8.75, 3.10, "2017-02-14"),
    ("Ember Grill", "Outdoor", 189.00, 120.00, "2021-04-01"),
    ("Fjord Tent", "Outdoor", 245.00, 151.40, "2020-08-17"),
    ("Glint Headphones", "Electronics", 79.99, 41.00, "2022-01-10"),
    ("Halo Speaker", "Electronics", 119.00, 66.60, "2021-09-23"),
    ("Iris Notebook", "Office", 4.20, 1.35, "2016-06-30"),
    ("Jasper Pen Set", "Office", 12.60, 5.05, "2019-12-05"),
]


def gen_products():
    rows = [[p, c, f"{price:.2f}", f"{cost:.2f}", launch] for p, c, price, cost, launch in PRODUCTS]
    write("products.csv", ["product", "category", "list_price", "unit_cost", "launch_date"], rows)


# --------------------------------------------------------------------------- customers
SEGMENTS = ["Consumer", "Corporate", "Home Office"]
TIERS = ["Bronze", "Silver", "Gold", "Platinum"]


def gen_customers():
    rng = random.Random(20240101)
    rows = []
    for i in range(1, 241):
        cid = f"C{i:04d}"
        name = f"{first_name(rng)} {last_name(rng)}"
        segment = rng.choices(SEGMENTS, weights=[6, 3, 2])[0]
        city = rng.choice(CITIES)
        signup = rand_date(rng, dt.date(2019, 1, 1), dt.date(2024, 6, 30))
        tier = "" if rng.random() < 0.08 else rng.choices(TIERS, weights=[5, 4, 2, 1])[0]
        birth_year = rng.randint(1950, 2004)
        rows.append([cid, name, segment, city, signup.isoformat(), tier, birth_year])
    write("customers.csv", ["customer_id", "name", "segment", "city", "signup_date", "loyalty_tier", "birth_year"], rows)


# --------------------------------------------------------------------------- sales
REGIONS = ["North", "South", "East", "West", "Central"]


def gen_sales():
    rng = random.Random(7301)
    rows = []
    start, end = dt.date(2023, 1, 1), dt.date(2024, 12, 31)
    for i in range(1, 2401):
        oid = f"S{i:05d}"
        order_date = rand_date(rng, start, end)
        ship_days = rng.choices([1, 2, 3, 4, 5, 6, 7, 10, 14], weights=[8, 12, 14, 10, 7, 4, 3, 2, 1])[0]
        ship_date = "" if rng.random() < 0.03 else (order_date + dt.timedelta(days=ship_days)).isoformat()
        region = rng.choices(REGIONS, weights=[5, 4, 4, 3, 2])[0]
        pidx = rng.choices(range(len(PRODUCTS)), weights=[8, 5, 9, 14, 2, 2, 6, 4, 16, 9])[0]
        product, _, price, _, _ = PRODUCTS[pidx]
        # Unknown customers (C09xx) exist on purpose: they are missing from customers.csv.
        if rng.random() < 0.04:
            cid = f"C09{rng.randint(0, 99):02d}"
        else:
            cid = f"C{rng.randint(1, 240):04d}"
        qty = rng.choices(range(1, 13), weights=[20, 15, 12, 10, 8, 7, 6, 5, 4, 3, 2, 2])[0]
        qty = "" if rng.random() < 0.025 else str(qty)
        unit_price = round(price * rng.uniform(0.92, 1.08), 2)
        discount = rng.choices([0.0, 0.05, 0.1, 0.15, 0.2], weights=[50, 20, 15, 10, 5])[0]
        channel = rng.choices(["Online", "Store", "Phone"], weights=[5, 4, 1])[0]
        rows.append([oid, order_date.isoformat(), ship_date, region, product, cid, qty,
                     f"{unit_price:.2f}", f"{discount:.2f}", channel])
    write("sales.csv", ["order_id", "order_date", "ship_date", "region", "product", "customer_id",
                        "quantity", "unit_price", "discount", "channel"], rows)


# --------------------------------------------------------------------------- employees
DEPARTMENTS = ["Engineering", "Sales", "Marketing", "Finance", "Operations", "Support", "Legal"]
BASE_SALARY = {"Engineering": 92000, "Sales": 64000, "Marketing": 70000, "Finance": 78000,
               "Operations": 61000, "Support": 52000, "Legal": 88000}
LEVELS = ["L1", "L2", "L3", "L4", "L5"]


def gen_employees():
    rng = random.Random(5151)
    rows = []
    managers = []
    for i in range(1, 601):
        eid = f"E{i:04d}"
        dept = rng.choices(DEPARTMENTS, weights=[22, 16, 9, 8, 14, 18, 4])[0]
        level = rng.choices(LEVELS, weights=[30, 30, 20, 13, 7])[0]
        hire = rand_date(rng, dt.date(2008, 1, 1), dt.date(2024, 12, 31))
        lvl = LEVELS.index(level)
        salary = BASE_SALARY[dept] * (1 + 0.18 * lvl) * rng.uniform(0.85, 1.2)
        salary = "" if rng.random() < 0.05 else str(int(round(salary, -2)))
        bonus = "" if rng.random() < 0.15 else f"{rng.choice([0, 2.5, 5, 7.5, 10, 12.5, 15]):.1f}"
        rating = "" if rng.random() < 0.1 else str(rng.choices([1, 2, 3, 4, 5], weights=[3, 10, 45, 30, 12])[0])
        remote = rng.choices(["yes", "no"], weights=[35, 65])[0]
        city = rng.choice(CITIES)
        manager = "" if (not managers or lvl >= 4) else rng.choice(managers)
        if lvl >= 3:
            managers.append(eid)
        rows.append([eid, first_name(rng), last_name(rng), dept, level, hire.isoformat(), salary,
                     bonus, rating, remote, city, manager])
    write("employees.csv", ["emp_id", "first_name", "last_name", "department", "level", "hire_date", "salary",
                            "bonus_pct", "rating", "remote", "city", "manager_id"], rows)


# --------------------------------------------------------------------------- sensors
def gen_sensors():
    rng = random.Random(8088)
    rows = []
    start = dt.datetime(2024, 3, 1, 0, 0)
    sensors = {"T1": (19.0, 45.0), "T2": (21.5, 40.0), "T3": (17.0, 55.0), "T4": (23.0, 35.0)}
    for step in range(10 * 24 * 4):  # 10 days, every 15 minutes
        ts = start + dt.timedelta(minutes=15 * step)
        hour = ts.hour + ts.minute / 60
        for sid, (base_t, base_h) in sensors.items():
            temp = base_t + 3.0 * math.sin((hour - 9) / 24 * 2 * math.pi) + rng.gauss(0, 0.6)
            hum = base_h - 6.0 * math.sin((hour - 9) / 24 * 2 * math.pi) + rng.gauss(0, 2.0)
            status = "ok"
            r = rng.random()
            if r < 0.012:
                status = "fault"
                temp = -99.0  # sentinel written by the faulty device
            temp_s = "" if rng.random() < 0.02 else f"{temp:.2f}"
            hum_s = "" if rng.random() < 0.02 else f"{hum:.1f}"
            rows.append([ts.strftime("%Y-%m-%d %H:%M:%S"), sid, temp_s, hum_s, status])
    write("sensors.csv", ["timestamp", "sensor_id", "temperature_c", "humidity_pct", "status"], rows)


# --------------------------------------------------------------------------- districts (percentages)
def gen_districts():
    rng = random.Random(4242)
    rows = []
    provinces = ["Alder", "Birch", "Cedar", "Duna"]
    for i in range(1, 121):
        district = f"D{i:03d}"
        province = rng.choice(provinces)
        population = rng.randint(8000, 250000)
        registered = int(population * rng.uniform(0.62, 0.8))
        turnout = rng.uniform(38, 82)
        a = rng.uniform(20, 55)
        b = rng.uniform(15, 100 - a - 5)
        c = 100 - a - b
        unemployment = rng.uniform(2.5, 14.0)
        turnout_s = "" if rng.random() < 0.04 else f"{turnout:.1f}%"
        rows.append([district, province, population, registered, turnout_s,
                     f"{a:.1f}%", f"{b:.1f}%", f"{c:.1f}%", f"{unemployment:.1f}%"])
    write("districts.csv", ["district", "province", "population", "registered_voters", "turnout",
                            "share_green", "share_blue", "share_other", "unemployment_rate"], rows)


# --------------------------------------------------------------------------- exam scores (long format)
SUBJECTS = ["Algebra", "Biology", "Chemistry", "History", "Literature"]


def gen_exams():
    rng = random.Random(3131)
    rows = []
    for s in range(1, 161):
        sid = f"ST{s:03d}"
        ability = rng.gauss(0, 1)
        cls = rng.choice(["A", "B", "C", "D"])
        for term in ["T1", "T2"]:
            for subj in SUBJECTS:
                if rng.random() < 0.03:
                    continue  # absent: no row at all
                score = 68 + 9 * ability + rng.gauss(0, 8) + (2 if term == "T2" else 0)
                score = max(0, min(100, int(round(score))))
                rows.append([sid, cls, term, subj, score])
    write("exams.csv", ["student_id", "class", "term", "subject", "score"], rows)


def main():
    gen_products()
    gen_customers()
    gen_sales()
    gen_employees()
    gen_sensors()
    gen_districts()
    gen_exams()


if __name__ == "__main__":
    main()
