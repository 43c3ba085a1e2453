#!/usr/bin/python3
"""Builds a small regression table from a data set Debian ships: the classic Auto MPG cars (UCI, 1983) as
python3-vega-datasets keeps them offline (vega_datasets/_data/cars.json, 406 cars). The target is the fuel
economy in miles per gallon; the features are the numeric columns plus the origin as three 0/1 columns.

    cylinders,displacement,horsepower,weight,acceleration,year,usa,europe,japan,mpg
    8,307,130,3504,12,70,1,0,0,18

Rules: cars without MPG or horsepower are left out (14 of 406); the year is the model year (70 to 82);
split into train.csv and validation.csv by a hash of the car's name and year (the same car always lands in
the same split), about a fifth held out. Standard library only (the JSON file is read directly, so pandas is
not imported); run with /usr/bin/python3 once python3-vega-datasets is installed (tools/install-deps.sh bench):

    /usr/bin/python3 tools/make_auto_mpg_dataset.py [--out examples/data/auto_mpg]
"""

import argparse
import csv
import glob
import hashlib
import json
import os
import sys

COLUMNS = ["cylinders", "displacement", "horsepower", "weight", "acceleration", "year", "usa", "europe", "japan",
           "mpg"]


def find_cars():
    for path in glob.glob("/usr/lib/python3/dist-packages/vega_datasets/_data/cars.json"):
        return path
    sys.exit("cars.json of python3-vega-datasets not found: apt-get install python3-vega-datasets "
             "(tools/install-deps.sh bench installs it)")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", default=os.path.join(os.path.dirname(__file__), "..", "examples", "data",
                                                      "auto_mpg"))
    parser.add_argument("--cars", help="cars.json (default: python3-vega-datasets')")
    args = parser.parse_args()
    with open(args.cars or find_cars(), encoding="utf-8") as f:
        cars = json.load(f)
    rows = {"train": [], "validation": []}
    skipped = 0
    for car in cars:
        if car.get("Miles_per_Gallon") is None or car.get("Horsepower") is None:
            skipped += 1
            continue
        origin = car["Origin"]
        year = int(car["Year"][:4]) - 1900
        row = [car["Cylinders"], car["Displacement"], car["Horsepower"], car["Weight_in_lbs"],
               car["Acceleration"], year, int(origin == "USA"), int(origin == "Europe"), int(origin == "Japan"),
               car["Miles_per_Gallon"]]
        key = hashlib.sha256(f"{car['Name']}|{year}".encode()).digest()[0]
        rows["validation" if key % 5 == 0 else "train"].append(row)
    os.makedirs(args.out, exist_ok=True)
    for split, data in rows.items():
        with open(os.path.join(args.out, split + ".csv"), "w", newline="", encoding="utf-8") as f:
            w = csv.writer(f, lineterminator="\n")
            w.writerow(COLUMNS)
            w.writerows(data)
    print(f"{args.out}: {len(rows['train'])} train, {len(rows['validation'])} validation cars "
          f"({skipped} without mpg or horsepower left out)")


if __name__ == "__main__":
    main()
