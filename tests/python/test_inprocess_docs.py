"""docs/python.md "Coming from nvidia-resiliency-ext": every row of its
table of the reference's public names is a name of nccl_resilient.inprocess
(an argument of the Wrapper, an attribute, a class with the parameters
listed), every refused one raises at construction, and the counts in the
text are the table's."""

import importlib
import inspect
import os
import re

import pytest

import nccl_resilient.inprocess as inprocess
from nccl_resilient.errors import ConfigError

from conftest import REPO


def rows():
    with open(os.path.join(REPO, "docs", "python.md")) as f:
        text = f.read()
    section = text[text.index("## Coming from nvidia-resiliency-ext"):]
    section = section[:section.index("\n## ", 10)]
    table = re.findall(r"^\| `([^`]+)`[^|]*\| (same|extended|refused) \|", section, re.M)
    assert table, "no table"
    return section, table


def resolve(path):
    target = inprocess
    for part in path.split("."):
        if not hasattr(target, part):
            target = importlib.import_module(f"{target.__name__}.{part}")
        else:
            target = getattr(target, part)
    return target


@pytest.mark.filterwarnings("ignore::DeprecationWarning")
@pytest.mark.parametrize("name, status", rows()[1])
def test_every_row_is_a_name_of_the_package(name, status):
    wrapper_parameters = inspect.signature(inprocess.Wrapper).parameters
    m = re.fullmatch(r"Wrapper\((\w+)=.*\)", name)
    if m:
        assert m.group(1) in wrapper_parameters, name
        return
    if name == "resilient_options":
        assert name in wrapper_parameters
        return
    m = re.fullmatch(r"([\w.]+?)(?:\((.*)\))?", name)
    path, arguments = m.group(1), m.group(2)
    target = resolve(path)
    if arguments:
        parameters = inspect.signature(target).parameters
        for argument in arguments.split(","):
            argument = argument.split("=")[0].strip()
            assert argument in parameters, (name, argument, list(parameters))
    if status == "refused":
        with pytest.raises(ConfigError) as e:
            target()
        assert "nccl_resilient" in str(e.value) or "need" in str(e.value)


def test_the_counts_in_the_text_are_the_tables():
    section, table = rows()
    counts = {s: sum(1 for _, status in table if status == s)
              for s in ("same", "extended", "refused")}
    stated = re.search(r"(\d+) names: (\d+) same, (\d+) extended, (\d+) refused", section)
    assert stated, "the counts sentence is missing"
    assert [int(x) for x in stated.groups()] == [len(table), counts["same"], counts["extended"],
                                                 counts["refused"]]
