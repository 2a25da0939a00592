"""Developer tools that drive the Streamlit app (and so may import it, unlike ``engine``)."""
