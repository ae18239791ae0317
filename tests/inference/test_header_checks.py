"""Decoded headers are checked, not trusted (issue 15 item 8): a net (or weights checkpoint)
whose JSON metadata is valid JSON of the wrong shape is refused with one NetFormatError (or
ExportError) line naming the file and the field, never AttributeError, KeyError, TypeError or a
JSON decoder message; ``load(path, expect=...)`` reaches the architecture and quantisation
fields it names and shows the value the file holds."""
from __future__ import annotations

import json

import pytest
from safetensors.torch import save_file

from nnue.inference import NetFormatError, load
from nnue.inference.net import META_KEY
from nnue.trainer.export import ExportError, load_checkpoint
from tests.netfiles import make_deep_int_net, make_deep_model, make_int_net, write_weights


def _write(tmp_path, net, header, name="bad.safetensors", raw: str | None = None):
    path = tmp_path / name
    tensors = {k: v.contiguous() for k, v in net.tensors().items()}
    save_file(tensors, str(path), {META_KEY: raw if raw is not None else json.dumps(header)})
    return path


def _mutate(header: dict, dotted: str, value, delete: bool = False) -> dict:
    h = json.loads(json.dumps(header))
    obj, *_ = [h]
    parts = dotted.split(".")
    for p in parts[:-1]:
        obj = obj[p]
    if delete:
        del obj[parts[-1]]
    else:
        obj[parts[-1]] = value
    return h


CASES = [  # (field, value or "<delete>", expected text)
    ("architecture", None, "field 'architecture' is null"),
    ("architecture", [1, 2], "field 'architecture' is a list"),
    ("architecture.hidden", "<delete>", "field 'architecture.hidden' is missing"),
    ("architecture.hidden", "32", "field 'architecture.hidden' is a string"),
    ("architecture.hidden", 32.5, "field 'architecture.hidden' is a number (32.5), expected an integer"),
    ("architecture.hidden", True, "field 'architecture.hidden' is a boolean"),
    ("architecture.num_inputs", 769, "field 'architecture.num_inputs' is 769"),
    ("architecture.l1_inputs", 3, "field 'architecture.l1_inputs' is 3"),
    ("architecture.activation", None, "field 'architecture.activation' is null"),
    ("architecture.feature_set", 5, "field 'architecture.feature_set' is a number"),
    ("architecture.kind", ["deep"], "field 'architecture.kind' is a list"),
    ("feature_set", "<delete>", "field 'feature_set' is missing"),
    ("output_buckets", {"a": 1}, "field 'output_buckets' is an object"),
    ("quantisation", None, "field 'quantisation' is null"),
    ("quantisation", "<delete>", "field 'quantisation' is missing"),
    ("quantisation.qa", "255", "field 'quantisation.qa' is a string"),
    ("quantisation.qa", 0, "field 'quantisation.qa' is 0"),
    ("quantisation.magic", 1, "field 'quantisation.magic' is not a field"),
    ("provenance", [1], "field 'provenance' is a list"),
    ("format_version", "1", "field 'format_version' is '1'"),
]


@pytest.mark.parametrize("field_,value,match", CASES, ids=[f"{c[0]}={c[1]!r}" for c in CASES])
def test_wrong_shapes_are_one_line_errors_naming_file_and_field(field_, value, match, tmp_path):
    net = make_int_net("chess768", "screlu", hidden=16)
    header = _mutate(net.header(), field_, value, delete=value == "<delete>")
    path = _write(tmp_path, net, header)
    with pytest.raises(NetFormatError) as e:
        load(path)
    msg = str(e.value)
    assert msg.startswith(str(path)) and match in msg and "\n" not in msg, msg


@pytest.mark.parametrize("field_,value,match", [
    ("architecture.l1_outputs", "<delete>", "field 'architecture.l1_outputs' is missing"),
    ("architecture.l2_outputs", "16", "field 'architecture.l2_outputs' is a string"),
    ("architecture.hidden_activation", None, "field .architecture.hidden_activation. is null"),
])
def test_deep_fields_are_checked(field_, value, match, tmp_path):
    net = make_deep_int_net("chess768", "crelu", 16, "MaterialCount<8>", 8, 8, "crelu")
    path = _write(tmp_path, net, _mutate(net.header(), field_, value, delete=value == "<delete>"))
    with pytest.raises(NetFormatError, match=match):
        load(path)


@pytest.mark.parametrize("raw,match", [("null", "metadata 'nnue_forge' is null"),
                                       ("[1, 2]", "metadata 'nnue_forge' is a list"),
                                       ('"text"', "metadata 'nnue_forge' is a string"),
                                       ("{not json", r"is not valid JSON \(at character 1\)")])
def test_metadata_that_is_not_an_object(raw, match, tmp_path):
    net = make_int_net("chess768", "crelu", hidden=16)
    path = _write(tmp_path, net, None, raw=raw)
    with pytest.raises(NetFormatError, match=match) as e:
        load(path)
    assert "Expecting" not in str(e.value)  # no JSON decoder text


def test_an_old_deep_header_without_l2_activation_still_loads(tmp_path):
    net = make_deep_int_net("chess768", "crelu", 16, "MaterialCount<8>", 8, 8, "screlu")
    path = _write(tmp_path, net, _mutate(net.header(), "architecture.l2_activation", None, delete=True))
    assert load(path).arch.get("l2_activation") is None
    assert load(path, expect={"hidden_activation": "screlu"}).kind == "deep"


def test_expect_reaches_nested_fields_and_shows_the_value(tmp_path):
    net = make_int_net("chess768", "screlu", hidden=32)
    net.save(tmp_path / "net.safetensors")
    path = tmp_path / "net.safetensors"
    assert load(path, expect={"hidden": 32}).arch["hidden"] == 32  # refused before the fix
    load(path, expect={"architecture.hidden": 32, "qa": 255, "quantisation.qb": 64, "feature_set": "chess768"})
    with pytest.raises(NetFormatError, match=r"field 'hidden' is 32, expected 64"):
        load(path, expect={"hidden": 64})
    with pytest.raises(NetFormatError, match=r"field 'architecture.activation' is 'screlu', expected 'crelu'"):
        load(path, expect={"architecture.activation": "crelu"})
    with pytest.raises(NetFormatError, match=r"field 'l9' is not in the header, expected 3"):
        load(path, expect={"l9": 3})


@pytest.mark.parametrize("hparams,match", [
    ("null", "metadata 'hparams' is null"),
    ("[1]", "metadata 'hparams' is a list"),
    ("{bad", "metadata 'hparams' is not valid JSON"),
    (json.dumps({"hidden": 32, "activation": "crelu", "output_buckets": "MaterialCount<8>"}),
     "hparams field 'features' is missing"),
    (json.dumps({"features": "chess768", "hidden": "32", "activation": "crelu", "output_buckets": "MaterialCount<8>"}),
     "hparams field 'hidden' is a string"),
    (json.dumps({"features": "chess768", "hidden": 32, "activation": "crelu", "output_buckets": "MaterialCount<8>",
                 "kind": "deep", "deep": [1]}), "hparams field 'deep' is a list"),
    (json.dumps({"features": "chess768", "hidden": 32, "activation": "crelu", "output_buckets": "MaterialCount<8>",
                 "quant": {"qa": "x"}}), "hparams field 'quant.qa' is a string"),
    (json.dumps({"features": "nofeatures", "hidden": 32, "activation": "crelu", "output_buckets": "MaterialCount<8>"}),
     "hparams field 'features'"),
])
def test_weights_checkpoint_hparams_are_checked(hparams, match, tmp_path):
    from safetensors.torch import load_file

    good = write_weights(make_deep_model(seed=1), tmp_path / "w.safetensors")
    state = load_file(str(good))
    bad = tmp_path / "bad.safetensors"
    save_file(state, str(bad), {"hparams": hparams})
    with pytest.raises(ExportError) as e:
        load_checkpoint(bad)
    msg = str(e.value)
    assert msg.startswith(str(bad)) and match in msg and "\n" not in msg, msg
