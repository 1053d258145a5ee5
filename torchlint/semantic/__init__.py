"""The semantic model every source rule queries: bindings, value facts and the project index.

Rules ask it what a name is bound to, what a module outputs, or what another file of the
project defines, instead of tracking assignments themselves; each answer is computed once per
file (`FileContext.shared`) and cached.
"""
