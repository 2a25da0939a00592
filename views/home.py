"""Home: why attention exists, the running example in 3-d, and the map of sections."""

import streamlit as st

from engine import attention as A
from engine.figures import vectors_3d
from ui import page
from ui.i18n import _
from ui.nav import PAGES

page.header()
page.prose("problem")
page.prose("example")
st.plotly_chart(
    vectors_3d(A.chapter_inputs(), A.CHAPTER_TOKENS,
               title=_("“Your journey starts with one step.” as six 3-d vectors")),
    key="home_vectors",
)
page.show_code(A.chapter_inputs)

st.subheader(_("The sections"))
for info in PAGES[1:]:
    with st.container(border=True):
        st.page_link(info.script, label=info.nav_title(), icon=info.icon)
        st.caption(_(info.section))
page.prose("howto")
