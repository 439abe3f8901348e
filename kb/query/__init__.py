"""The query language: question text → Workload.

parse          the entry: text → items → phrase terminals → phrases (grammar/query.lark, run by lark) → Workload
words          the vocabulary: GPU, model, precision and runtime names and their near misses
classify       items → the grammar's phrase terminals, by the vocabulary (fillers dropped)
resolve        each phrase of the grammar → the workload's fields (on_<rule>)
phrases        number words, the cost phrase, a card's variant, two values of one field
unparse        Workload → query text that parses to the same Workload
finish         defaults and checks once every word is read
unknown_words  what to say about a word that is not known
workload       the Workload record
"""
