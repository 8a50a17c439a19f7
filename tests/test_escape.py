"""One escaping function per medium: what each leaves of hostile text."""

from __future__ import annotations

import xml.dom.minidom

from gradscope import escape

HOSTILE = '[link=x"><svg/onload=alert(1)>]A\x1b[31m|`[a](javascript:x)*b*\x07\ud800'


def test_the_terminal_sees_control_characters_spelled_out():
    shown = escape.terminal("a\x1b[31mb\tc\nd\x7f")
    assert shown == "a\\x1b[31mb\tc\nd\\x7f"


def test_markdown_reads_no_link_tag_emphasis_or_cell_end():
    shown = escape.markdown(HOSTILE)
    assert "<svg" not in shown and "](" not in shown.replace("\\](", "")
    assert "\\*b\\*" in shown and "\\|" in shown and "\\`" in shown and "\x1b" not in shown
    assert escape.markdown("my_function") == "my_function"  # (no emphasis inside a name)


def test_a_code_span_cannot_be_ended_early():
    assert "`" not in escape.markdown_code("a`b") and escape.fence("``x") == "```"


def test_xml_and_html_carry_anything_well_formed():
    document = f"<a t='{escape.html(HOSTILE)}'>{escape.html(escape.xml(HOSTILE))}</a>"
    xml.dom.minidom.parseString(document.encode("utf-8", "surrogatepass"))


def test_a_plot_label_has_no_mathematics_or_lines():
    assert escape.plot("a$x$\nb\x1b") == "a\\$x\\$ b\\x1b"


def test_bidirectional_overrides_are_spelled_out():
    assert escape.terminal("a\u202eb\u2066c") == "a\\u202eb\\u2066c"
