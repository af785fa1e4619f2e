#!/usr/bin/env python3
"""Generate the small synthetic CSV files of the `packages` suite.

Standard library only and deterministic (one `random.Random(seed)` per file,
fixed number formatting, "\\n" line endings): re-running reproduces
byte-identical files in datasets/packages/data/. All names and values are
invented. The packages suite also uses copies of two of the tabular suite's
tables (data/employees.csv, data/exams.csv): a task names only files in
its own suite's folder.
"""

import csv
import math
import os
import random

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "data")


def write(name, header, rows):
    os.makedirs(OUT, exist_ok=True)
    with open(os.path.join(OUT, name), "w", newline="", encoding="utf-8") as f:
        w = csv.writer(f, lineterminator="\n")
        w.writerow(header)
        w.writerows(rows)


def gen_ads():
    """Weekly marketing spend (thousands) and units sold: a linear model plus noise."""
    rng = random.Random(11)
    rows = []
    for week in range(1, 151):
        tv = rng.uniform(5, 60)
        radio = rng.uniform(0, 25)
        online = rng.uniform(2, 40)
        holiday = 1 if rng.random() < 0.12 else 0
        units = 120 + 3.1 * tv + 4.6 * radio + 1.8 * online + 55 * holiday + rng.gauss(0, 18)
        rows.append([week, f"{tv:.2f}", f"{radio:.2f}", f"{online:.2f}", holiday, f"{units:.1f}"])
    write("ads.csv", ["week", "tv", "radio", "online", "holiday", "units"], rows)


def gen_admissions():
    """Applicants with a test score, a grade average and an admission decision (logistic model)."""
    rng = random.Random(23)
    rows = []
    for i in range(1, 301):
        score = rng.gauss(600, 80)
        gpa = min(4.0, max(1.5, rng.gauss(3.1, 0.4)))
        z = -14.0 + 0.014 * score + 1.9 * gpa
        admitted = 1 if rng.random() < 1 / (1 + math.exp(-z)) else 0
        rows.append([f"A{i:03d}", f"{score:.0f}", f"{gpa:.2f}", admitted])
    write("admissions.csv", ["applicant", "test_score", "gpa", "admitted"], rows)


TOWNS = ["Ashby", "Belmor", "Carrow", "Dunley", "Elmstead", "Farrow", "Glenhope", "Harwick",
         "Ivel", "Juniper", "Kestle", "Larkmoor", "Milbury", "Netherby", "Oakhurst", "Pendle"]


def gen_roads():
    """A connected road network between invented towns, with lengths in km."""
    rng = random.Random(31)
    pos = {t: (rng.uniform(0, 100), rng.uniform(0, 100)) for t in TOWNS}
    edges = set()
    # a random spanning tree first (guarantees connectivity), then extra roads
    order = TOWNS[:]
    rng.shuffle(order)
    for i in range(1, len(order)):
        a = order[i]
        b = rng.choice(order[:i])
        edges.add(tuple(sorted((a, b))))
    while len(edges) < 30:
        a, b = rng.sample(TOWNS, 2)
        edges.add(tuple(sorted((a, b))))
    rows = []
    for a, b in sorted(edges):
        (x1, y1), (x2, y2) = pos[a], pos[b]
        km = math.hypot(x1 - x2, y1 - y2) * rng.uniform(1.05, 1.4)
        rows.append([a, b, f"{km:.1f}"])
    write("roads.csv", ["town_a", "town_b", "km"], rows)


def gen_friends():
    """An undirected friendship graph (unweighted) with several components."""
    rng = random.Random(47)
    people = [f"P{i:02d}" for i in range(1, 41)]
    groups = [people[0:14], people[14:26], people[26:33], people[33:37], people[37:39], people[39:40]]
    edges = set()
    for g in groups:
        if len(g) < 2:
            continue
        for i in range(1, len(g)):  # chain-ish tree inside the group
            edges.add(tuple(sorted((g[i], rng.choice(g[:i])))))
        extra = len(g) // 2
        for _ in range(extra):
            a, b = rng.sample(g, 2)
            edges.add(tuple(sorted((a, b))))
    write("friends.csv", ["person_a", "person_b"], sorted(edges))


def main():
    gen_ads()
    gen_admissions()
    gen_roads()
    gen_friends()


if __name__ == "__main__":
    main()
