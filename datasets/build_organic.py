#!/usr/bin/env python3
"""Write the `organic-error` tasks into math/tasks.jsonl and tabular/tasks.jsonl.

Every expected value here is computed by a route independent of the task's
pandas reference: from the clean records the generator draws before it
formats them (datasets/tabular/generate_messy.py), with the csv module for the
older files, and with exact integer or Fraction arithmetic for math. Existing
lines with an `-org-` id are replaced; other lines are kept as they are.

    python3 datasets/build_organic.py
"""

import csv
import datetime as dt
import json
import math
import os
import statistics
import sys
from collections import Counter, defaultdict
from fractions import Fraction

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "tabular"))
sys.set_int_max_str_digits(0)

import generate_messy as g  # noqa: E402

TAB = []
MATH = []


def num(value, decimals=None, abs_tol=None, **extra):
    e = {"type": "number", "value": value}
    if abs_tol is None:
        abs_tol = 1e-9 if decimals is None else 0.5 * 10 ** -decimals
    e["abs_tol"] = abs_tol
    e.update(extra)
    return e


def text(value):
    return {"type": "text", "value": value}


def task(suite, id, question, expected, reference, tags, files=(), packages=()):
    t = {"id": id, "question": question}
    if files:
        t["files"] = [f"data/{f}" for f in files]
    t["expected"] = expected
    t["reference"] = reference.strip("\n") + "\n"
    t["packages"] = list(packages)
    t["tags"] = ["organic-error"] + tags
    (TAB if suite == "tabular" else MATH).append(t)


def tab(id, question, expected, reference, tags, files):
    task("tabular", id, question, expected, reference, tags, files, ["pandas"])


def rows_of(name):
    with open(os.path.join(HERE, "tabular", "data", name), newline="", encoding="utf-8") as f:
        return list(csv.DictReader(f))


# ================================================================== tabular
EU_READ = "o = pd.read_csv('shop_orders.csv', sep=';', decimal=',', thousands='.', dtype={'order_date': str})\n"
eu = g.eu_orders()
tab("tab-org-eu-001",
    "shop_orders.csv lists the 2024 orders of a chain of kitchen shops. What is the summed `total` of all orders "
    "placed in the Lindau store? Give the answer as a decimal rounded to 2 decimal places.",
    num(sum(r[6] for r in eu if r[2] == "Lindau"), 2, 0.01),
    "import pandas as pd\n" + EU_READ + "answer = round(float(o.loc[o['store'] == 'Lindau', 'total'].sum()), 2)",
    ["delimiter", "decimal-comma", "thousands-separator"], ["shop_orders.csv"])
corvo = [r[5] for r in eu if r[3] == "Espressomaschine Corvo"]
tab("tab-org-eu-002",
    "In shop_orders.csv, what is the mean unit_price of the product 'Espressomaschine Corvo' over its orders? "
    "Give the answer as a decimal rounded to 2 decimal places.",
    num(sum(corvo) / len(corvo), 2),
    "import pandas as pd\n" + EU_READ
    + "answer = round(float(o.loc[o['product'] == 'Espressomaschine Corvo', 'unit_price'].mean()), 2)",
    ["delimiter", "decimal-comma", "thousands-separator"], ["shop_orders.csv"])
by_month = defaultdict(float)
for r in eu:
    by_month[f"{r[1]:%Y-%m}"] += r[6]
tab("tab-org-eu-003",
    "Using shop_orders.csv, in which calendar month was the summed order `total` the largest? "
    "Give the month as text in the form YYYY-MM.",
    text(max(by_month, key=by_month.get)),
    "import pandas as pd\n" + EU_READ
    + "o['order_date'] = pd.to_datetime(o['order_date'], format='%d.%m.%Y')\n"
    "answer = o.groupby(o['order_date'].dt.strftime('%Y-%m'))['total'].sum().idxmax()",
    ["delimiter", "decimal-comma", "dates"], ["shop_orders.csv"])

staff = g.staff()
ST_READ = "s = pd.read_csv('staff_roster.csv', encoding='latin-1')\n"
mu = [r[4] for r in staff if r[2] == "Münsterau"]
tab("tab-org-latin1-001",
    "staff_roster.csv lists the staff of a company. What is the mean monthly_salary of the staff based in "
    "Münsterau? Give the answer as a decimal rounded to 2 decimal places.",
    num(sum(mu) / len(mu), 2),
    "import pandas as pd\n" + ST_READ + "answer = round(float(s.loc[s['city'] == 'Münsterau', 'monthly_salary'].mean()), 2)",
    ["encoding", "filter"], ["staff_roster.csv"])
tab("tab-org-latin1-002",
    "In staff_roster.csv, the name column holds a first name and a surname. How many staff members have a "
    "surname that begins with the letter Ö? Give the answer as an integer.",
    num(sum(1 for r in staff if r[1].split(" ")[1].startswith("Ö"))),
    "import pandas as pd\n" + ST_READ + "answer = int(s['name'].str.split(' ').str[1].str.startswith('Ö').sum())",
    ["encoding", "strings"], ["staff_roster.csv"])
zs = defaultdict(int)
for r in staff:
    if r[2] == "Zürichsee":
        zs[r[3]] += r[4]
tab("tab-org-latin1-003",
    "In staff_roster.csv, which department has the largest total monthly_salary among the staff based in "
    "Zürichsee? Give the department name as text.",
    text(max(zs, key=zs.get)),
    "import pandas as pd\n" + ST_READ
    + "answer = s[s['city'] == 'Zürichsee'].groupby('department')['monthly_salary'].sum().idxmax()",
    ["encoding", "group-by"], ["staff_roster.csv"])

wh = g.warehouse()
WH_READ = "w = pd.read_csv('warehouse_report.csv', skiprows=3, dtype={'sku': str})\nw = w[w['sku'] != 'TOTAL']\n"
tab("tab-org-wh-001",
    "warehouse_report.csv is a stock report exported from the warehouse system. What is the total value of the "
    "stock on hand, that is on_hand × unit_cost summed over all SKUs? Give the answer as a decimal rounded to 2 "
    "decimal places.",
    num(sum(r[3] * r[4] for r in wh), 2, 0.01),
    "import pandas as pd\n" + WH_READ + "answer = round(float((w['on_hand'] * w['unit_cost']).sum()), 2)",
    ["title-rows", "total-row"], ["warehouse_report.csv"])
best = max(wh, key=lambda r: r[3] * r[4])
tab("tab-org-wh-002",
    "In warehouse_report.csv, which SKU has the largest stock value (on_hand × unit_cost)? Give the SKU exactly "
    "as it is written in the report, as text.",
    text(best[0]),
    "import pandas as pd\n" + WH_READ
    + "w['value'] = w['on_hand'] * w['unit_cost']\nanswer = str(w.loc[w['value'].idxmax(), 'sku'])",
    ["title-rows", "leading-zeros"], ["warehouse_report.csv"])
tab("tab-org-wh-003",
    "In warehouse_report.csv, the first letter of a location is its aisle. How many units are on hand in aisle B "
    "in total? Give the answer as an integer.",
    num(sum(r[3] for r in wh if r[2].startswith("B"))),
    "import pandas as pd\n" + WH_READ + "answer = int(w.loc[w['location'].str.startswith('B'), 'on_hand'].sum())",
    ["title-rows", "filter"], ["warehouse_report.csv"])

vis = g.visits()
V_READ = ("v = pd.read_csv('clinic_visits.csv')\n"
          "raw = v['visit_date']\n"
          "v['visit_date'] = (pd.to_datetime(raw, format='%Y-%m-%d', errors='coerce')\n"
          "                   .fillna(pd.to_datetime(raw, format='%d.%m.%Y', errors='coerce'))\n"
          "                   .fillna(pd.to_datetime(raw, format='%b %d, %Y', errors='coerce')))\n"
          "assert v['visit_date'].notna().all()\n")
tab("tab-org-dates-001",
    "clinic_visits.csv lists the visits to three clinics. How many visits took place in March 2024? "
    "Give the answer as an integer.",
    num(sum(1 for r in vis if (r[2].year, r[2].month) == (2024, 3))),
    "import pandas as pd\n" + V_READ
    + "answer = int(((v['visit_date'].dt.year == 2024) & (v['visit_date'].dt.month == 3)).sum())",
    ["mixed-date-formats", "dates"], ["clinic_visits.csv"])
wd = Counter(r[2].strftime("%A") for r in vis)
tab("tab-org-dates-002",
    "Using clinic_visits.csv, on which day of the week (Monday, Tuesday, ...) did the most visits take place? "
    "Give the weekday name as text.",
    text(wd.most_common(1)[0][0]),
    "import pandas as pd\n" + V_READ + "answer = v['visit_date'].dt.day_name().value_counts().idxmax()",
    ["mixed-date-formats", "weekday"], ["clinic_visits.csv"])
tab("tab-org-dates-003",
    "Using clinic_visits.csv, what were the total fees collected by the Riverside clinic for visits from "
    "1 July 2024 to 31 December 2024 inclusive? Give the answer as an integer.",
    num(sum(r[4] for r in vis if r[3] == "Riverside" and r[2] >= dt.date(2024, 7, 1))),
    "import pandas as pd\n" + V_READ
    + "answer = int(v.loc[(v['clinic'] == 'Riverside') & (v['visit_date'] >= '2024-07-01'), 'fee'].sum())",
    ["mixed-date-formats", "filter"], ["clinic_visits.csv"])
span = defaultdict(list)
for r in vis:
    span[r[1]].append(r[2])
spans = [(max(d) - min(d)).days for d in span.values() if len(d) >= 2]
tab("tab-org-dates-004",
    "Using clinic_visits.csv, for every patient with at least two visits compute the number of days between "
    "their first and their last visit. What is the mean of these numbers? Give the answer as a decimal rounded "
    "to 2 decimal places.",
    num(sum(spans) / len(spans), 2),
    "import pandas as pd\n" + V_READ
    + "g = v.groupby('patient_id')['visit_date'].agg(['min', 'max', 'count'])\n"
    "g = g[g['count'] >= 2]\nanswer = round(float((g['max'] - g['min']).dt.days.mean()), 2)",
    ["mixed-date-formats", "date-differences", "multi-step"], ["clinic_visits.csv"])

qs = g.quarters()
Q_READ = ("q = pd.read_csv('regional_quarters.csv', header=[0, 1], index_col=0)\n"
          "q.columns = [f'{y}-{p}' for y, p in zip(['2023'] * 4 + ['2024'] * 4, q.columns.get_level_values(1))]\n")
tab("tab-org-header-001",
    "regional_quarters.csv holds the quarterly sales of each region in 2023 and 2024. What were the total sales "
    "of the second quarter of 2024, summed over all regions? Give the answer as an integer.",
    num(sum(v[5] for _, v in qs)),
    "import pandas as pd\n" + Q_READ + "answer = int(q['2024-Q2'].sum())",
    ["two-row-header", "duplicate-columns"], ["regional_quarters.csv"])
growth = {r: sum(v[4:]) / sum(v[:4]) - 1 for r, v in qs}
tab("tab-org-header-002",
    "Using regional_quarters.csv, which region had the largest percentage growth in full-year sales from 2023 "
    "to 2024? Give the region name as text.",
    text(max(growth, key=growth.get)),
    "import pandas as pd\n" + Q_READ
    + "y23 = q[[c for c in q.columns if c.startswith('2023')]].sum(axis=1)\n"
    "y24 = q[[c for c in q.columns if c.startswith('2024')]].sum(axis=1)\n"
    "answer = str((y24 / y23 - 1).idxmax())",
    ["two-row-header", "duplicate-columns", "percentages"], ["regional_quarters.csv"])

sv = g.survey()
S_READ = ("s = pd.read_csv('survey.csv', dtype={'respondent_id': str, 'postcode': str}, thousands=',',\n"
          "                na_values=['-', '?', 'unknown', 'refused'])\n"
          "s['satisfaction'] = pd.to_numeric(s['satisfaction'].str.rstrip('%'))\n")
ages = [r[1] for r in sv if r[1] is not None]
tab("tab-org-survey-001",
    "survey.csv holds the answers of a household survey. What is the mean age of the respondents whose age is "
    "recorded? Give the answer as a decimal rounded to 2 decimal places.",
    num(sum(ages) / len(ages), 2),
    "import pandas as pd\n" + S_READ + "answer = round(float(s['age'].mean()), 2)",
    ["missing-markers"], ["survey.csv"])
tab("tab-org-survey-002",
    "In survey.csv, what is the median income of the respondents who reported an income? Give the answer as a "
    "decimal rounded to 1 decimal place.",
    num(statistics.median([r[2] for r in sv if r[2] is not None]), 1),
    "import pandas as pd\n" + S_READ + "answer = round(float(s['income'].median()), 1)",
    ["missing-markers", "thousands-separator", "median"], ["survey.csv"])
tab("tab-org-survey-003",
    "In survey.csv, how many respondents have a postcode that begins with the digit 0? Give the answer as an "
    "integer.",
    num(sum(1 for r in sv if r[5].startswith("0"))),
    "import pandas as pd\n" + S_READ + "answer = int(s['postcode'].str.startswith('0').sum())",
    ["leading-zeros"], ["survey.csv"])
sat = defaultdict(list)
for r in sv:
    if r[4] is not None:
        sat[r[3]].append(r[4])
sat_mean = {k: sum(v) / len(v) for k, v in sat.items()}
top = max(sat_mean, key=sat_mean.get)
tab("tab-org-survey-004",
    "In survey.csv, which region has the highest mean satisfaction among the respondents who gave one, and what "
    "is that mean? Answer with two named values, each printed on its own line in the form @name[value]: "
    "@region[the region name] and @satisfaction[the mean as a percentage number rounded to 2 decimal places, "
    "e.g. 61.25].",
    {"type": "multi", "answers": {"region": text(top), "satisfaction": num(sat_mean[top], 2)}},
    "import pandas as pd\n" + S_READ
    + "m = s.groupby('region')['satisfaction'].mean()\n"
    "print(f\"@region[{m.idxmax()}]\")\nprint(f\"@satisfaction[{m.max():.2f}]\")",
    ["missing-markers", "percent-strings", "group-by", "multi-answer"], ["survey.csv"])
tab("tab-org-survey-005",
    "In survey.csv, how many respondents reported an income above 60,000 and an age under 40? Give the answer as "
    "an integer.",
    num(sum(1 for r in sv if r[1] is not None and r[2] is not None and r[2] > 60000 and r[1] < 40)),
    "import pandas as pd\n" + S_READ + "answer = int(((s['income'] > 60000) & (s['age'] < 40)).sum())",
    ["missing-markers", "thousands-separator", "filter"], ["survey.csv"])

cat = {p: (c, u) for p, c, u in g.parts()}
po = g.part_orders()
P_READ = ("p = pd.read_csv('parts.csv', dtype={'part_no': str})\n"
          "o = pd.read_csv('part_orders.csv', dtype={'part_no': str})\n"
          "m = o.merge(p, on='part_no')\n")
tab("tab-org-parts-001",
    "parts.csv is a parts catalogue and part_orders.csv lists order lines. What is the total value "
    "(quantity × unit_price) of the order lines whose part is in the catalogue? Give the answer as a decimal "
    "rounded to 2 decimal places.",
    num(sum(q * cat[p][1] for _, p, q in po if p in cat), 2, 0.01),
    "import pandas as pd\n" + P_READ + "answer = round(float((m['quantity'] * m['unit_price']).sum()), 2)",
    ["leading-zeros", "joins", "missing-markers"], ["parts.csv", "part_orders.csv"])
units = defaultdict(int)
for _, p, q in po:
    if p in cat:
        units[cat[p][0]] += q
tab("tab-org-parts-002",
    "Using parts.csv and part_orders.csv, which part category had the most units ordered (counting only order "
    "lines whose part is in the catalogue)? Give the category as text.",
    text(max(units, key=units.get)),
    "import pandas as pd\n" + P_READ + "answer = m.groupby('category')['quantity'].sum().idxmax()",
    ["leading-zeros", "joins", "group-by"], ["parts.csv", "part_orders.csv"])

ci = g.cities()
C_READ = "c = pd.read_csv('cities.csv', thousands=',')\n"
tab("tab-org-cities-001",
    "cities.csv lists cities with their population and area. How many cities have more than 1,000,000 "
    "inhabitants? Give the answer as an integer.",
    num(sum(1 for r in ci if r[1] > 1_000_000)),
    "import pandas as pd\n" + C_READ + "answer = int((c['population'] > 1_000_000).sum())",
    ["thousands-separator", "filter"], ["cities.csv"])
tab("tab-org-cities-002",
    "In cities.csv, which city has the highest population density (population divided by area_km2)? "
    "Give the city name as text.",
    text(max(ci, key=lambda r: r[1] / r[2])[0]),
    "import pandas as pd\n" + C_READ + "answer = c.loc[(c['population'] / c['area_km2']).idxmax(), 'city']",
    ["thousands-separator", "ratios"], ["cities.csv"])

cp = g.campaigns()
K_READ = ("k = pd.read_csv('campaigns.csv', thousands=',')\n"
          "k['budget'] = pd.to_numeric(k['budget'].str.lstrip('$').str.replace(',', ''))\n"
          "k['rate'] = pd.to_numeric(k['conversion_rate'].str.rstrip('%')) / 100\n")
tab("tab-org-campaigns-001",
    "campaigns.csv lists marketing campaigns. What is the total budget of the campaigns whose conversion rate is "
    "at least 5%? Give the answer as a decimal rounded to 2 decimal places.",
    num(sum(b for _, _, b, _, r in cp if r >= 5.0), 2),
    "import pandas as pd\n" + K_READ + "answer = round(float(k.loc[k['rate'] >= 0.05 - 1e-12, 'budget'].sum()), 2)",
    ["percent-strings", "currency-strings", "filter"], ["campaigns.csv"])
conv = sum(Fraction(k) * Fraction(str(r)) / 100 for _, _, _, k, r in cp)
tab("tab-org-campaigns-002",
    "In campaigns.csv, the number of conversions of a campaign is its clicks times its conversion rate. What is "
    "the overall cost per conversion, the total budget of all campaigns divided by their total conversions? "
    "Give the answer as a decimal rounded to 4 decimal places.",
    num(float(sum(Fraction(b) for _, _, b, _, _ in cp) / conv), 4),
    "import pandas as pd\n" + K_READ + "answer = round(float(k['budget'].sum() / (k['clicks'] * k['rate']).sum()), 4)",
    ["percent-strings", "currency-strings", "thousands-separator", "ratios"], ["campaigns.csv"])

sp = g.spend()
M_READ = ("d = pd.read_csv('monthly_spend.csv')\nd = d[d['month'] != 'Total']\n"
          "d['month'] = pd.to_datetime(d['month'], format='%Y-%m')\n")
tab("tab-org-spend-001",
    "monthly_spend.csv holds the monthly spend of four departments. What was the combined spend of all "
    "departments in the third quarter of 2023 (July to September)? Give the answer as a decimal rounded to 2 "
    "decimal places.",
    num(sum(a for m, _, a in sp if m in ("2023-07", "2023-08", "2023-09")), 2, 0.01),
    "import pandas as pd\n" + M_READ
    + "q3 = (d['month'] >= '2023-07-01') & (d['month'] <= '2023-09-30')\n"
    "answer = round(float(d.loc[q3, 'amount'].sum()), 2)",
    ["total-row", "dates"], ["monthly_spend.csv"])
h1 = defaultdict(float)
for m, _, a in sp:
    if m.startswith("2024"):
        h1[m] += a
tab("tab-org-spend-002",
    "Using monthly_spend.csv, what was the mean monthly combined spend (all departments together) over the "
    "months of 2024 in the file? Give the answer as a decimal rounded to 2 decimal places.",
    num(sum(h1.values()) / len(h1), 2),
    "import pandas as pd\n" + M_READ
    + "m = d[d['month'].dt.year == 2024].groupby('month')['amount'].sum()\nanswer = round(float(m.mean()), 2)",
    ["total-row", "dates", "group-by"], ["monthly_spend.csv"])

stn = g.stations()
hi = [r[4] for r in stn if r[2] > 1000]
tab("tab-org-stations-001",
    "stations.txt lists weather stations with their elevation (elev_m), mean temperature and yearly rain "
    "(rain_mm). What is the mean rain_mm of the stations above 1000 m? Give the answer as a decimal rounded to "
    "2 decimal places.",
    num(sum(hi) / len(hi), 2),
    "import pandas as pd\nst = pd.read_csv('stations.txt', sep=r'\\s+')\n"
    "answer = round(float(st.loc[st['elev_m'] > 1000, 'rain_mm'].mean()), 2)",
    ["whitespace-delimited", "pandas3"], ["stations.txt"])

# ---- pandas 3 behaviour on the clean files
sales = rows_of("sales.csv")
rev_m = defaultdict(float)
rev_q = defaultdict(float)
for r in sales:
    if r["quantity"]:
        v = float(r["quantity"]) * float(r["unit_price"]) * (1 - float(r["discount"]))
        rev_m[r["order_date"][:7]] += v
        y, mo = int(r["order_date"][:4]), int(r["order_date"][5:7])
        rev_q[(y, (mo - 1) // 3)] += v
months = sorted(rev_m)
tab("tab-org-pd3-001",
    "In sales.csv the revenue of an order is quantity * unit_price * (1 - discount); ignore orders with a missing "
    "quantity. Compute the revenue of each calendar month (by order_date). What is the largest increase in "
    "revenue from one month to the next? Give the answer as a decimal rounded to 2 decimal places.",
    num(max(rev_m[b] - rev_m[a] for a, b in zip(months, months[1:])), 2, 0.01),
    "import pandas as pd\ns = pd.read_csv('sales.csv', parse_dates=['order_date']).dropna(subset=['quantity'])\n"
    "s['revenue'] = s['quantity'] * s['unit_price'] * (1 - s['discount'])\n"
    "m = s.set_index('order_date')['revenue'].resample('ME').sum()\nanswer = round(float(m.diff().max()), 2)",
    ["pandas3", "resample", "dates"], ["sales.csv"])
tab("tab-org-pd3-002",
    "In sales.csv, with revenue = quantity * unit_price * (1 - discount) and orders with a missing quantity "
    "ignored, what was the revenue of the best calendar quarter (by order_date, over both years)? Give the "
    "answer as a decimal rounded to 2 decimal places.",
    num(max(rev_q.values()), 2, 0.01),
    "import pandas as pd\ns = pd.read_csv('sales.csv', parse_dates=['order_date']).dropna(subset=['quantity'])\n"
    "s['revenue'] = s['quantity'] * s['unit_price'] * (1 - s['discount'])\n"
    "answer = round(float(s.set_index('order_date')['revenue'].resample('QE').sum().max()), 2)",
    ["pandas3", "resample", "quarters"], ["sales.csv"])
sens = rows_of("sensors.csv")
hour = defaultdict(list)
for r in sens:
    if r["sensor_id"] == "T1" and r["status"] == "ok" and r["temperature_c"]:
        hour[r["timestamp"][:13]].append(float(r["temperature_c"]))
tab("tab-org-pd3-003",
    "In sensors.csv, take sensor T1's valid readings (status 'ok' and a temperature present) and average them per "
    "clock hour. What is the highest hourly mean temperature? Give the answer as a decimal rounded to 3 decimal "
    "places.",
    num(max(sum(v) / len(v) for v in hour.values()), 3),
    "import pandas as pd\nd = pd.read_csv('sensors.csv', parse_dates=['timestamp'])\n"
    "d = d[(d['sensor_id'] == 'T1') & (d['status'] == 'ok')].dropna(subset=['temperature_c'])\n"
    "answer = round(float(d.set_index('timestamp')['temperature_c'].resample('h').mean().max()), 3)",
    ["pandas3", "resample", "time-series"], ["sensors.csv"])
t2 = sorted((r["timestamp"], r) for r in sens if r["sensor_id"] == "T2")
filled, last = [], None
for _, r in t2:
    if r["status"] == "ok" and r["temperature_c"]:
        last = float(r["temperature_c"])
    if last is not None:
        filled.append(last)
tab("tab-org-pd3-004",
    "In sensors.csv, take sensor T2's readings in time order. Treat the temperature of every fault reading as "
    "missing, then fill each missing temperature with the most recent valid temperature before it. What is the "
    "mean of the filled temperature series? Give the answer as a decimal rounded to 3 decimal places.",
    num(sum(filled) / len(filled), 3),
    "import pandas as pd\nd = pd.read_csv('sensors.csv', parse_dates=['timestamp'])\n"
    "d = d[d['sensor_id'] == 'T2'].sort_values('timestamp')\n"
    "t = d['temperature_c'].where(d['status'] == 'ok')\nanswer = round(float(t.ffill().mean()), 3)",
    ["pandas3", "forward-fill", "time-series"], ["sensors.csv"])
emp = rows_of("employees.csv")
numeric = ["salary", "bonus_pct", "rating"]
dept = defaultdict(lambda: defaultdict(list))
for r in emp:
    for col in numeric:
        if r[col]:
            dept[r["department"]][col].append(float(r[col]))
means = {d: {c: sum(v) / len(v) for c, v in cols.items()} for d, cols in dept.items()}
top_d = max(means, key=lambda d: means[d]["rating"])
tab("tab-org-pd3-005",
    "In employees.csv, compute for each department the mean of salary, bonus_pct and rating (ignoring missing "
    "values). Which department has the highest mean rating, and what are its mean salary and mean rating? "
    "Answer with three named values, each printed on its own line in the form @name[value]: "
    "@department[name], @salary[mean salary rounded to 2 decimal places] and @rating[mean rating rounded to 4 "
    "decimal places].",
    {"type": "multi", "answers": {"department": text(top_d),
                                  "salary": num(means[top_d]["salary"], 2),
                                  "rating": num(means[top_d]["rating"], 4)}},
    "import pandas as pd\ne = pd.read_csv('employees.csv')\n"
    "m = e.groupby('department')[['salary', 'bonus_pct', 'rating']].mean()\nbest = m['rating'].idxmax()\n"
    "print(f\"@department[{best}]\")\nprint(f\"@salary[{m.loc[best, 'salary']:.2f}]\")\n"
    "print(f\"@rating[{m.loc[best, 'rating']:.4f}]\")",
    ["pandas3", "group-by", "multi-answer"], ["employees.csv"])


# ================================================================== math
def mt(id, question, expected, reference, tags, packages=()):
    task("math", id, question, expected, reference, tags, (), packages)


def big(n):
    return num(float(n), exact=str(n)) if abs(n) > 2 ** 53 else num(n)


SETLIM = "import sys\nsys.set_int_max_str_digits(0)\n"
mt("math-org-intstr-001", "What is the sum of the decimal digits of 3^10000? Give the answer as an integer.",
   num(sum(map(int, str(3 ** 10000)))),
   SETLIM + "answer = sum(int(c) for c in str(3 ** 10000))", ["big-integers", "digits", "int-str-limit"])
mt("math-org-intstr-002",
   "How many times does the digit 0 occur in the decimal representation of 2000! (2000 factorial), counting "
   "every zero and not only the trailing ones? Give the answer as an integer.",
   num(str(math.factorial(2000)).count("0")),
   SETLIM + "import math\nanswer = str(math.factorial(2000)).count('0')",
   ["big-integers", "factorials", "digits", "int-str-limit"])
fa, fb = 1, 1
for _ in range(25000 - 2):
    fa, fb = fb, fa + fb
mt("math-org-intstr-003",
   "With F(1) = F(2) = 1 and F(n) = F(n-1) + F(n-2), what are the first (leading) 10 digits of F(25000)? "
   "Give them as an integer.",
   num(int(str(fb)[:10])),
   SETLIM + "a, b = 1, 1\nfor _ in range(25000 - 2):\n    a, b = b, a + b\nanswer = int(str(b)[:10])",
   ["big-integers", "fibonacci", "digits", "int-str-limit"])
mt("math-org-intstr-004", "How many decimal digits does 9^(9^4) have? Give the answer as an integer.",
   num(len(str(9 ** 6561))),
   SETLIM + "answer = len(str(9 ** (9 ** 4)))", ["big-integers", "digits", "int-str-limit"])
concat = "".join(str(i) for i in range(1, 1501))
mt("math-org-intstr-005",
   "Write the integers 1, 2, 3, ..., 1500 one after another to form a single number N = 123456789101112...1500. "
   "What is N modulo 999983? Give the answer as an integer.",
   num(sum(int(ch) * pow(10, len(concat) - 1 - i, 999983) for i, ch in enumerate(concat)) % 999983),
   SETLIM + "n = int(''.join(str(i) for i in range(1, 1501)))\nanswer = n % 999983",
   ["big-integers", "modular-arithmetic", "int-str-limit"])
p1000 = Fraction(math.comb(2000, 1000), 2 ** 2000)
mt("math-org-overflow-001",
   "A fair coin is tossed 2000 times. What is the probability of exactly 1000 heads? Give the answer as a "
   "decimal rounded to 8 decimal places.",
   num(float(p1000), 8),
   "import math\nanswer = round(math.comb(2000, 1000) / 2 ** 2000, 8)", ["probability", "binomial", "float-overflow"])
pb = sum(Fraction(math.comb(1500, k)) * Fraction(3, 10) ** k * Fraction(7, 10) ** (1500 - k) for k in range(430, 471))
mt("math-org-overflow-002",
   "X follows a binomial distribution with n = 1500 trials and success probability p = 0.3. What is "
   "P(430 <= X <= 470)? Give the answer as a decimal rounded to 6 decimal places.",
   num(float(pb), 6),
   "import math\n\ndef logpmf(k, n=1500, p=0.3):\n"
   "    return (math.lgamma(n + 1) - math.lgamma(k + 1) - math.lgamma(n - k + 1)\n"
   "            + k * math.log(p) + (n - k) * math.log(1 - p))\n\n"
   "answer = round(sum(math.exp(logpmf(k)) for k in range(430, 471)), 6)",
   ["probability", "binomial", "float-overflow"])
xs = [1000, 1001, 1002, 999.5]
lse = 1002 + math.log(sum(math.exp(x - 1002) for x in xs))
mt("math-org-overflow-003",
   "What is the natural logarithm of e^1000 + e^1001 + e^1002 + e^999.5? Give the answer as a decimal rounded "
   "to 8 decimal places.",
   num(lse, 8),
   "import math\nxs = [1000, 1001, 1002, 999.5]\nm = max(xs)\n"
   "answer = round(m + math.log(sum(math.exp(x - m) for x in xs)), 8)",
   ["numerical", "float-overflow", "log-sum-exp"])
M = 10 ** 9 + 7
w = [1, 1, 2]
for n in range(3, 10001):
    w.append((w[-1] + w[-2] + w[-3]) % M)
mt("math-org-recursion-001",
   "A staircase has 10000 steps. A climber goes up 1, 2 or 3 steps at a time. In how many different orders of "
   "moves can she get from the bottom to the top? Give the answer modulo 1000000007, as an integer.",
   num(w[10000]),
   "M = 10**9 + 7\na, b, c = 1, 1, 2  # ways(0), ways(1), ways(2)\nfor _ in range(3, 10001):\n"
   "    a, b, c = b, c, (a + b + c) % M\nanswer = c",
   ["combinatorics", "dynamic-programming", "recursion-depth"])
xs = [i / 20 for i in range(41)]
ys = [math.exp(-x * x) for x in xs]
trap = sum((ys[i] + ys[i + 1]) / 2 * (xs[i + 1] - xs[i]) for i in range(40))
mt("math-org-numpy-001",
   "Sample f(x) = exp(-x^2) at x = 0, 0.05, 0.10, ..., 2.00 (41 points) and estimate the integral of f from 0 to 2 "
   "with the composite trapezoid rule on those samples, using numpy. Give the estimate as a decimal rounded to 8 "
   "decimal places.",
   num(trap, 8),
   "import numpy as np\nx = np.linspace(0, 2, 41)\nanswer = round(float(np.trapezoid(np.exp(-x ** 2), x)), 8)",
   ["numerical", "integration", "numpy2"], ["numpy"])


def add_months(d, k):
    y, m = divmod(d.month - 1 + k, 12)
    y, m = d.year + y, m + 1
    last = (dt.date(y + (m == 12), m % 12 + 1, 1) - dt.timedelta(days=1)).day
    return dt.date(y, m, min(d.day, last))


start = dt.date(2024, 1, 31)
due = [add_months(start, k) for k in range(1, 25)]
mt("math-org-dates-001",
   "A loan is taken out on 31 January 2024 and repaid in 24 monthly installments. Installment k is due k months "
   "after the loan date, on the same day of the month, or on the last day of the month in months that are too "
   "short. How many of the 24 due dates fall on a Saturday or a Sunday? Give the answer as an integer.",
   num(sum(1 for d in due if d.weekday() >= 5)),
   "import datetime as dt\nimport calendar\nstart = dt.date(2024, 1, 31)\ncount = 0\nfor k in range(1, 25):\n"
   "    y, m = divmod(start.month - 1 + k, 12)\n    y, m = start.year + y, m + 1\n"
   "    d = dt.date(y, m, min(start.day, calendar.monthrange(y, m)[1]))\n    count += d.weekday() >= 5\n"
   "answer = count",
   ["dates", "calendar"])
tot = Fraction(0)
absum = 0.0
for b in range(1, 11):
    for c in range(1, 11):
        disc = b * b - 4 * c
        if disc >= 0:
            absum += abs((-b + math.sqrt(disc)) / 2) + abs((-b - math.sqrt(disc)) / 2)
        else:
            absum += 2 * math.sqrt(c)  # |r|^2 = c for complex conjugate roots of a monic quadratic
mt("math-org-complex-001",
   "Consider the 100 quadratic equations x^2 + b*x + c = 0 for all integers b and c from 1 to 10. Each has two "
   "roots (real or complex, a double root counted twice). What is the sum of the absolute values |r| of all 200 "
   "roots? Give the answer as a decimal rounded to 6 decimal places.",
   num(absum, 6),
   "import cmath\ntotal = 0.0\nfor b in range(1, 11):\n    for c in range(1, 11):\n"
   "        s = cmath.sqrt(b * b - 4 * c)\n        total += abs((-b + s) / 2) + abs((-b - s) / 2)\n"
   "answer = round(total, 6)",
   ["algebra", "complex-numbers"])
amounts = ["1,204.50", "980.00", "12,030.75", "7.25", "3,300.00", "45.10", "18,222.40", "640.00", "2,015.95",
           "99.99", "1,000,000.00", "310.30"]
mt("math-org-parse-001",
   "An expense ledger lists these amounts as text, exactly as written in the export: " + json.dumps(amounts)
   + ". What is their total? Give the answer as a decimal rounded to 2 decimal places.",
   num(float(sum(Fraction(a.replace(",", "")) for a in amounts)), 2),
   "amounts = " + json.dumps(amounts) + "\nanswer = round(sum(float(a.replace(',', '')) for a in amounts), 2)",
   ["parsing", "thousands-separator", "arithmetic"])


def merge(path, new):
    keep = []
    with open(path, encoding="utf-8") as f:
        for line in f:
            if line.strip() and "-org-" not in json.loads(line)["id"]:
                keep.append(line.rstrip("\n"))
    with open(path, "w", encoding="utf-8") as f:
        for line in keep + [json.dumps(t, ensure_ascii=False) for t in new]:
            f.write(line + "\n")


if __name__ == "__main__":
    merge(os.path.join(HERE, "tabular", "tasks.jsonl"), TAB)
    merge(os.path.join(HERE, "math", "tasks.jsonl"), MATH)
    print(f"{len(TAB)} tabular and {len(MATH)} math organic-error tasks written")
