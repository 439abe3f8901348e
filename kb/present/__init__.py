"""Presentation: an Answer or the rules → text, Markdown, wiki pages.

render     an Answer as terminal text and Markdown
catalogue  the GPU and model lists of `kbq gpus` and `kbq models`
export*    the wiki pages: GPU table, formulas, flows (Mermaid), prices, worked examples
"""
