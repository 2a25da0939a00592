"""AppTest over the whole app: navigation lists only built pages, and every page runs."""

import pytest

from tests.plotly_json import ROOT, open_page
from ui.nav import PAGES


def test_every_registered_page_has_a_script_and_unique_url():
    assert len({p.url_path for p in PAGES}) == len(PAGES)
    for info in PAGES:
        assert (ROOT / info.script).is_file(), info.script


@pytest.mark.smoke
@pytest.mark.parametrize("info", PAGES, ids=[p.url_path for p in PAGES])
def test_page_runs_inside_the_app(info):
    at = open_page("app.py", 120)
    assert not at.exception
    at.switch_page(info.script).run()
    assert not at.exception, [e.value for e in at.exception]
    assert at.title and at.title[0].value
    assert any("Device:" in c.value for c in at.sidebar.caption)


def test_home_links_every_section():
    at = open_page("app.py")
    assert not at.exception
    assert at.title[0].value == "Attention, step by step"
    links = at.get("page_link")
    assert len(links) == len(PAGES) - 1
