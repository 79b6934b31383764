"""Java .properties parsing and ${env:...}/${file:...}/${conn:...} indirection (no brokers)."""

from __future__ import annotations

import logging

import pytest

from replicator.config.properties import (
    connection_references,
    parse_properties,
    read_properties,
    resolve_references,
)
from replicator.errors import ConfigError


def test_separators_equals_colon_and_whitespace():
    text = "a=1\nb:2\nc 3\nd = 4\ne\t:\t5\nf =  = 6\ng\n"
    assert parse_properties(text) == {
        "a": "1",
        "b": "2",
        "c": "3",
        "d": "4",
        "e": "5",
        "f": "= 6",  # one separator only, as in Java
        "g": "",
    }


def test_comments_blank_lines_and_leading_whitespace():
    text = "# comment\n! also a comment\n\n   \n   key = value\n\t# indented comment\n"
    assert parse_properties(text) == {"key": "value"}


def test_a_hash_after_a_value_is_part_of_the_value():
    # Java has no end-of-line comments; the loader rejects such values where it matters.
    assert parse_properties("topics = foo.*  # only some\n") == {"topics": "foo.*  # only some"}


def test_trailing_whitespace_is_kept_as_in_java():
    assert parse_properties("key = value  \n") == {"key": "value  "}


def test_line_continuation_skips_leading_whitespace_of_next_line():
    text = "topics = foo, \\\n          bar, \\\n   baz\nnext = 1\n"
    assert parse_properties(text) == {"topics": "foo, bar, baz", "next": "1"}


def test_even_number_of_backslashes_does_not_continue():
    assert parse_properties("path = C:\\\\\nnext = 1\n") == {"path": "C:\\", "next": "1"}


def test_continuation_at_end_of_file():
    assert parse_properties("key = value\\") == {"key": "value"}


def test_comment_line_ending_in_backslash_does_not_continue():
    assert parse_properties("# comment \\\nkey = 1\n") == {"key": "1"}


def test_continued_line_starting_with_hash_is_not_a_comment():
    assert parse_properties("key = a\\\n#b\n") == {"key": "a#b"}


def test_escapes_in_keys_and_values():
    text = "my\\ key\\:x = tab\\there\\nnew\\u00e9\\\\ \\q\n"
    assert parse_properties(text) == {"my key:x": "tab\there\nnewé\\ q"}


def test_unicode_surrogate_pairs_are_joined():
    assert parse_properties("smile = \\ud83d\\ude00\n") == {"smile": "\U0001f600"}


def test_regex_backslashes_must_be_doubled_as_in_java():
    assert parse_properties("topics = demo\\\\..*\n") == {"topics": "demo\\..*"}
    assert parse_properties("topics = demo\\..*\n") == {"topics": "demo..*"}


def test_crlf_and_cr_line_endings():
    assert parse_properties("a=1\r\nb=2\rc=3") == {"a": "1", "b": "2", "c": "3"}


def test_malformed_unicode_escape_names_line_not_value():
    with pytest.raises(ConfigError) as info:
        parse_properties("ok = 1\nsasl.password = hunter2\\u12zz\n", source="mm2.properties")
    message = str(info.value)
    assert "mm2.properties:2" in message
    assert "sasl.password" in message
    assert "hunter2" not in message


def test_duplicate_key_keeps_last_and_warns(caplog):
    with caplog.at_level(logging.WARNING):
        props = parse_properties("a = 1\nb = 2\na = 3\n")
    assert props["a"] == "3"
    assert "'a' is set on line 1 and again on line 3" in caplog.text


def test_read_properties_file_and_latin1_fallback(tmp_path):
    path = tmp_path / "mm2.properties"
    path.write_bytes("name = caf\xe9\n".encode("iso-8859-1"))
    assert read_properties(path) == {"name": "café"}
    path.write_text("name = café\n", encoding="utf-8")
    assert read_properties(path) == {"name": "café"}


def test_read_missing_file_is_a_config_error(tmp_path):
    with pytest.raises(ConfigError, match="cannot read configuration file"):
        read_properties(tmp_path / "missing.properties")


def test_env_reference(monkeypatch):
    monkeypatch.setenv("MM2_PASSWORD", "s3cret")
    resolved = resolve_references({"a.sasl.password": "${env:MM2_PASSWORD}", "x": "plain"})
    assert resolved == {"a.sasl.password": "s3cret", "x": "plain"}


def test_several_references_in_one_value(monkeypatch):
    monkeypatch.setenv("USER_NAME", "alice")
    monkeypatch.setenv("USER_PASS", "pw")
    value = 'Module required username="${env:USER_NAME}" password="${env:USER_PASS}";'
    assert (
        resolve_references({"k": value})["k"] == 'Module required username="alice" password="pw";'
    )


def test_missing_env_var_names_the_key(monkeypatch):
    monkeypatch.delenv("NOT_SET_ANYWHERE", raising=False)
    with pytest.raises(ConfigError) as info:
        resolve_references({"a.ssl.key.password": "${env:NOT_SET_ANYWHERE}"})
    assert str(info.value).startswith("a.ssl.key.password: environment variable NOT_SET_ANYWHERE")


def test_file_reference(tmp_path):
    secrets = tmp_path / "secrets.properties"
    secrets.write_text("password = from-file\nuser: bob\n")
    resolved = resolve_references(
        {"p": f"${{file:{secrets}:password}}", "u": f"${{file:{secrets}:user}}"}
    )
    assert resolved == {"p": "from-file", "u": "bob"}


def test_file_reference_missing_key_names_config_key_and_file_key(tmp_path):
    secrets = tmp_path / "secrets.properties"
    secrets.write_text("other = value\n")
    with pytest.raises(ConfigError) as info:
        resolve_references({"b.sasl.jaas.config": f"${{file:{secrets}:jaas}}"})
    message = str(info.value)
    assert message.startswith("b.sasl.jaas.config:")
    assert "has no key 'jaas'" in message
    assert "value" not in message.replace("has no key", "")


def test_file_reference_missing_file_names_the_key(tmp_path):
    with pytest.raises(ConfigError) as info:
        resolve_references({"k": f"${{file:{tmp_path}/nope.properties:password}}"})
    assert str(info.value).startswith("k: ")
    assert "cannot read configuration file" in str(info.value)


def test_malformed_file_reference():
    with pytest.raises(ConfigError, match=r"k: expected \$\{file:path:key\}"):
        resolve_references({"k": "${file:justakey}"})


def test_unknown_provider_names_the_key():
    with pytest.raises(ConfigError, match="k: config provider 'vault'"):
        resolve_references({"k": "${vault:secret/data:password}"})


def test_resolved_values_are_not_scanned_again(monkeypatch):
    monkeypatch.setenv("LOOKS_LIKE_REF", "${env:OTHER}")
    assert resolve_references({"k": "${env:LOOKS_LIKE_REF}"}) == {"k": "${env:OTHER}"}


_JAAS = 'ScramLoginModule required username="mm2" password="${conn:password}";'


def test_conn_references_resolve_from_the_connection_the_caller_gives():
    resolved = resolve_references(
        {"a.sasl.jaas.config": _JAAS, "b.ssl.key.password": "${conn:dr_key}"},
        {"password": "from-the-connection", "dr_key": "k3y"},
    )
    assert resolved == {
        "a.sasl.jaas.config": 'ScramLoginModule required username="mm2" '
        'password="from-the-connection";',
        "b.ssl.key.password": "k3y",
    }


@pytest.mark.parametrize("connection", [None, {}, {"other": "hunter2-other"}])
def test_a_conn_reference_the_connection_cannot_answer_names_key_and_reference(connection):
    """Outside Airflow (no connection) or a connection without that secret: the key, the
    reference and the names it does give, never a value."""
    with pytest.raises(ConfigError) as info:
        resolve_references({"a.sasl.jaas.config": _JAAS}, connection)
    message = str(info.value)
    assert message.startswith("a.sasl.jaas.config: ${conn:password}: the connection gives no ")
    given = "other" if connection else "none"
    assert f"(it gives: {given})" in message
    assert "hunter2-other" not in message


def test_connection_references_are_the_names_a_configuration_takes():
    props = {"a.sasl.jaas.config": _JAAS, "b.x": "${conn:b}/${env:HOME}", "c": "plain"}
    assert connection_references(props) == {"password", "b"}
