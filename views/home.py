"""Home: why attention exists, the running example in 3-d, and the map of sections."""

import streamlit as st

import ui.alt as alt
from engine import attention as A
from engine.diagrams import home as diagrams
from engine.figures import vectors_3d
from engine.sections import self_attention as sections
from ui import notebook, page
from ui.diagram import colour_legend
from ui.i18n import _
from ui.nav import PAGES
from ui.numbers import list_separator, plotly_separators


def bottleneck_diagram(part: str | None = None) -> str:
    """The RNN encoder–decoder beside attention, on the chapter's six 3-d vectors used as encoder states.

    The shapes are those of the tensors computed here: the inputs (T, d) stand for the encoder
    states, the last row for the RNN's single hidden state, and the weights and context vector of
    one step of attention (:func:`engine.sections.self_attention.query_walkthrough`, first token).
    ``part`` draws one half alone ("rnn" or "attention", for a phone).
    """
    states = A.chapter_inputs()  # (T, d): one state per token
    step = sections.query_walkthrough(states, 0)  # attn_weights (T,), context_vec (d,)
    return diagrams.home(
        diagrams.HomeLabels(
            rnn=_("RNN encoder–decoder"), attention=_("with attention"), encoder=_("encoder"),
            decoder=_("decoder"), hidden_state=_("single hidden state"), attention_weights=_("attention weights"),
            context_vec=_("context vector"), source_tokens=tuple(A.CHAPTER_TOKENS),
            target_tokens=tuple(_("Ton voyage commence par un pas.").split()),
        ),
        diagrams.HomeShapes(encoder_states=tuple(states.shape), hidden_state=tuple(states[-1].shape),
                            attn_weights=tuple(step.attn_weights.shape), context_vec=tuple(step.context_vec.shape)),
        part=part,
    )


page.header()
page.prose("problem")
left, right = st.columns([3, 2])
with left:
    page.diagram_for_width(
        bottleneck_diagram(), [bottleneck_diagram(part) for part in diagrams.PARTS],
        alt=_("Diagram: an RNN hands the decoder only its last hidden state; attention hands it a "
              "weighted sum of every encoder state."), key="home")
with right:
    # the halves are named, not placed: on a phone they stack, and "left"/"right" would be wrong there
    st.caption(_("RNN encoder–decoder: the decoder sees only the last hidden state, whatever the length of the "
                 "sentence. With attention: at each step it weighs every encoder state. Here the encoder states "
                 "are the six 3-d vectors of the running example below."))
    colour_legend()
page.prose("example")
vectors_title = _("“Your journey starts with one step.” as six 3-d vectors")
st.plotly_chart(
    vectors_3d(A.chapter_inputs(), A.CHAPTER_TOKENS, title=vectors_title,
               axis_titles=[_("dim {i}").format(i=i) for i in range(A.chapter_inputs().shape[1])],
               separators=plotly_separators(), between=list_separator()),
    key="home_vectors",
    alt=alt.vectors(vectors_title, dict(zip(A.CHAPTER_TOKENS, A.chapter_inputs(), strict=True))),
)
page.show_code(A.chapter_inputs)

st.subheader(_("The sections"))
for info in PAGES[1:]:
    with st.container(border=True):
        st.page_link(info.script, label=info.nav_title(), icon=info.icon)
        st.caption(_(info.section))
page.prose("howto")
notebook.download_button()
