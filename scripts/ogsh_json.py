"""ogsh_json.py - reading the --json results ogsh prints, for the test and
benchmark scripts (tests/quant/test_digits.py, tests/gpu/make_islands.py,
bench/q18_bench.py)."""
import json


def json_objects(text):
    """Every top-level JSON object printed in text, in order."""
    out, dec, i = [], json.JSONDecoder(), 0
    while True:
        i = text.find("{", i)
        if i < 0:
            return out
        try:
            obj, end = dec.raw_decode(text, i)
            out.append(obj)
            i = end
        except ValueError:
            i += 1
