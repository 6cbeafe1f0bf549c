#!/usr/bin/env python3
"""Golden renderings for surf's Jinja interpreter and chat templates (tests/unit/test_jinja.cpp,
tests/unit/test_chat_template.cpp).

The reference is Hugging Face transformers itself: chat templates are rendered with
transformers.utils.chat_template_utils.render_jinja_template (jinja2 ImmutableSandboxedEnvironment,
trim_blocks/lstrip_blocks, loop controls, HF's tojson and raise_exception), exactly as
tokenizer.apply_chat_template does, with the special tokens passed as template variables.

Writes into tests/fixtures/chat_template/:
  jinja_cases.json    small templates exercising one feature each: {name, template, context, expected | error}
  conversations.json  the conversations: {name, messages, add_generation_prompt, [tools], [enable_thinking]}
  renders.json        {template, conversation, expected | error} for every template x conversation
  manifest.txt        versions and checksums
Templates: prompts/chat_template_nemotron_nano_v2_vl.jinja (ours) and the hand-written HF-style
templates chatml_tools.jinja, llama_style.jinja, mistral_style.jinja in the fixture folder.
Deterministic: no randomness, no clock.
"""
import hashlib
import json
import os
import sys

import jinja2
import transformers
from transformers.utils.chat_template_utils import _compile_jinja_template, render_jinja_template

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
OUT = os.path.join(ROOT, "tests", "fixtures", "chat_template")
OUR_TEMPLATE = os.path.join(ROOT, "prompts", "chat_template_nemotron_nano_v2_vl.jinja")
SPECIAL_TOKENS = {"bos_token": "<s>", "eos_token": "</s>", "unk_token": "<unk>"}

# ---------------------------------------------------------------------------------------------------
# Feature cases: (name, template, context). Errors are recorded as {"error": message}.
CASES = [
    # output and literals
    ("text_only", "hello world", {}),
    ("print_var", "{{ x }}", {"x": "v"}),
    ("print_types", "{{ 1 }} {{ 1.5 }} {{ true }} {{ none }} {{ 'a' }} {{ [1, 'b', none, false] }} {{ {'k': 'v', 'n': 2} }}", {}),
    ("print_floats", "{{ 1e20 }} {{ 1.0 }} {{ 0.0001 }} {{ 0.00001 }} {{ 1e16 }} {{ 1e15 }} {{ 0.1 + 0.2 }} {{ 2.5e-7 }} {{ -3.25 }}", {}),
    ("print_tuple", "{{ (1, 'a') }} {{ (1,) }} {{ () }}", {}),
    ("print_nested_repr", "{{ x }}", {"x": {"a": ["it's", 'say "hi"', "back\\slash", "nl\n"], "b": None}}),
    ("string_escapes", "{{ 'a\\nb\\tc\\\\d\\'e' }}|{{ \"q\\\"q\" }}|{{ '\\u00e9\\x41' }}|{{ 'keep\\d' }}", {}),
    ("adjacent_strings", "{{ 'ab' 'cd' \"ef\" }}", {}),
    ("unicode_passthrough", "{{ x }} héllo ✓ 日本", {"x": "emoji 😀 and ü"}),
    ("integer_underscores", "{{ 1_000 + 1 }}", {}),
    # comments and raw
    ("comment", "a{# comment #}b", {}),
    ("comment_multiline", "a\n{# comment\n spanning lines #}\nb", {}),
    ("comment_dash", "a   {#- c -#}   b", {}),
    ("raw_block", "{% raw %}{{ not rendered }}{% endraw %}", {}),
    ("raw_block_ws", "x\n  {% raw -%}\n  {{ a }}\n  {%- endraw %}\ny", {}),
    # whitespace control (trim_blocks + lstrip_blocks)
    ("trim_blocks", "{% if true %}\nyes\n{% endif %}\nafter", {}),
    ("lstrip_blocks", "line\n    {% if true %}\n    body\n    {% endif %}\nend", {}),
    ("lstrip_not_after_text", "x {% if true %}y{% endif %} z", {}),
    ("dash_left", "a   \n  {{- 'b' }}", {}),
    ("dash_right", "{{ 'a' -}}   \n  b", {}),
    ("dash_block", "a\n  {%- if true -%}\n  b\n  {%- endif -%}\n  c", {}),
    ("plus_keeps", "a\n    {%+ if true %}b{% endif +%}\nc", {}),
    ("var_no_trim", "{{ 'a' }}\nb", {}),
    ("trailing_newline_dropped", "abc\n", {}),
    ("crlf_normalised", "a\r\nb\r\n{% if true %}\r\nc\r\n{% endif %}\r\n", {}),
    ("indented_for", "<ul>\n  {% for i in [1, 2] %}\n    <li>{{ i }}</li>\n  {% endfor %}\n</ul>", {}),
    ("comment_lstrip_trim", "a\n   {# note #}\nb", {}),
    # if / elif / else
    ("if_elif_else", "{% for x in [1, 2, 3] %}{% if x == 1 %}one{% elif x == 2 %}two{% else %}many{% endif %},{% endfor %}", {}),
    ("if_undefined_falsy", "{% if missing %}y{% else %}n{% endif %}", {}),
    ("if_empty_containers", "{% if [] %}a{% endif %}{% if {} %}b{% endif %}{% if '' %}c{% endif %}{% if 0 %}d{% endif %}{% if [0] %}e{% endif %}", {}),
    # for loops
    ("for_loop_vars", "{% for x in 'abc' %}{{ loop.index0 }}{{ loop.index }}{{ loop.revindex }}{{ loop.revindex0 }}{{ loop.first }}{{ loop.last }}{{ loop.length }};{% endfor %}", {}),
    ("for_else", "{% for x in [] %}x{% else %}empty{% endfor %}|{% for x in missing %}x{% else %}undefined{% endfor %}", {}),
    ("for_filter", "{% for x in range(10) if x is odd %}{{ x }}:{{ loop.index }}/{{ loop.length }} {% endfor %}", {}),
    ("for_unpack", "{% for k, v in d.items() %}{{ k }}={{ v }};{% endfor %}{% for a, b in [[1, 2], (3, 4)] %}{{ a + b }}{% endfor %}", {"d": {"z": 1, "a": 2}}),
    ("for_dict_keys", "{% for k in d %}{{ k }}{% endfor %}", {"d": {"b": 1, "a": 2}}),
    ("for_prev_next", "{% for x in [1, 2, 3] %}{{ loop.previtem }}<{{ x }}>{{ loop.nextitem }} {% endfor %}", {}),
    ("for_cycle", "{% for x in range(5) %}{{ loop.cycle('a', 'b', 'c') }}{% endfor %}", {}),
    ("for_break_continue", "{% for i in range(10) %}{% if i == 2 %}{% continue %}{% endif %}{% if i == 5 %}{% break %}{% endif %}{{ i }}{% endfor %}", {}),
    ("for_nested_loop", "{% for a in [1, 2] %}{% for b in [1, 2] %}{{ loop.index }}{{ a }}{{ b }} {% endfor %}{{ loop.index }}|{% endfor %}", {}),
    ("for_scope", "{% set x = 0 %}{% for i in [1, 2] %}{{ x }}{% set x = i %}{{ x }}{% endfor %}{{ x }}", {}),
    ("for_scope_fresh_per_iteration", "{% for i in [1, 2] %}{% if i == 2 %}[{{ y }}]{% endif %}{% set y = i %}{% endfor %}[{{ y }}]", {}),
    ("for_over_string_unicode", "{% for c in 'héé' %}<{{ c }}>{% endfor %}", {}),
    # set and namespace
    ("set_simple", "{% set x = 'a' ~ 1 %}{{ x }}", {}),
    ("set_in_if_leaks", "{% if true %}{% set z = 5 %}{% endif %}{{ z }}", {}),
    ("set_tuple", "{% set a, b = 1, 2 %}{{ a }}{{ b }}{% set c, d = [3, 4] %}{{ c }}{{ d }}", {}),
    ("set_block", "{% set s %}X{{ 1 + 1 }}Y{% endset %}[{{ s }}]", {}),
    ("namespace", "{% set ns = namespace(count=0, found=false) %}{% for i in range(4) %}{% set ns.count = ns.count + i %}{% endfor %}{{ ns.count }} {{ ns.found }} {{ ns }}", {}),
    ("namespace_from_dict", "{% set ns = namespace({'a': 1}, b=2) %}{{ ns.a }}{{ ns.b }}{{ ns.c is defined }}", {}),
    ("override_global", "{% set messages = messages[1:] %}{{ messages | length }}", {"messages": [1, 2, 3]}),
    # macros
    ("macro_basic", "{% macro greet(name, punct='!') %}Hi {{ name }}{{ punct }}{% endmacro %}{{ greet('a') }} {{ greet('b', '?') }} {{ greet(name='c', punct='.') }}", {}),
    ("macro_sees_later_globals", "{% macro m() %}{{ c }}{% endmacro %}{% set c = 9 %}{{ m() }}", {}),
    ("macro_missing_arg_undefined", "{% macro m(a, b) %}[{{ a }}][{{ b }}]{% endmacro %}{{ m(1) }}", {}),
    ("macro_whitespace", "{% macro m(x) %}\n  <{{ x }}>\n{% endmacro %}\n{{ m(1) }}{{ m(2) }}", {}),
    ("macro_recursion", "{% macro f(n) %}{% if n > 0 %}{{ n }}{{ f(n - 1) }}{% endif %}{% endmacro %}{{ f(4) }}", {}),
    # operators
    ("arith", "{{ 1 + 2 * 3 }} {{ (1 + 2) * 3 }} {{ 7 / 2 }} {{ 7 // 2 }} {{ -7 // 2 }} {{ 7 % 3 }} {{ -7 % 3 }} {{ 2 ** 10 }} {{ 2 ** -1 }} {{ -2 ** 2 }} {{ 1 + 2.0 }} {{ 10 / 5 }}", {}),
    ("float_floor_mod", "{{ 7.5 // 2 }} {{ -7.5 % 2 }}", {}),
    ("string_ops", "{{ 'a' + 'b' }} {{ 'ab' * 3 }} {{ 2 * 'x' }} {{ [1] + [2] }} {{ [0] * 3 }} {{ 'n' ~ 1 ~ none ~ true ~ missing }}", {}),
    ("percent_format", "{{ '%s-%d|%5.2f|%%|%r' % ('a', 3, 3.14159, 'q') }} {{ 'x=%s' % 5 }}", {}),
    ("comparisons", "{{ 1 < 2 }} {{ 2 <= 2 }} {{ 'b' > 'a' }} {{ 3 >= 4 }} {{ 1 == 1.0 }} {{ true == 1 }} {{ 'a' != 'b' }} {{ 1 < 2 < 3 }} {{ 3 > 2 > 2 }} {{ [1, 2] < [1, 3] }} {{ none == none }}", {}),
    ("membership", "{{ 'b' in 'abc' }} {{ 2 in [1, 2] }} {{ 'k' in {'k': 1} }} {{ 'x' not in ['y'] }} {{ 1 in missing }} {{ (1, 2) in [[1, 2]] }}", {}),
    ("logic_values", "{{ 0 or 'x' }}|{{ 1 and 2 }}|{{ none or [] }}|{{ not 0 }}|{{ not 'a' }}|{{ '' and 1 }}|{{ missing or 'dflt' }}", {}),
    ("precedence_not_in", "{{ not 1 in [1] }} {{ not true and false }} {{ true or false and false }}", {}),
    ("conditional_expr", "{{ 'y' if 1 else 'n' }}|{{ 'y' if 0 else 'n' }}|{{ 'y' if 0 }}|{{ 'a' if false else 'b' if true else 'c' }}", {}),
    ("filter_binds_tighter", "{{ 'a' ~ 'b' | upper }} {{ -3 | abs }} {{ 1 + [1, 2] | length }}", {}),
    # subscripts, slices, attributes
    ("subscripts", "{{ d['a'] }} {{ d.a }} {{ l[0] }} {{ l[-1] }} {{ l.1 }} {{ s[1] }} {{ s[-1] }} [{{ l[10] }}] [{{ d.missing }}] [{{ d['missing'] }}]", {"d": {"a": "A"}, "l": [1, 2, 3], "s": "héllo"}),
    ("slices", "{{ l[1:] }} {{ l[:-1] }} {{ l[::2] }} {{ l[::-1] }} {{ l[5:] }} {{ l[-2:] }} {{ s[::-1] }} {{ s[1:3] }} {{ l[3:0:-1] }} {{ s[:100] }}", {"l": [1, 2, 3, 4], "s": "héllo"}),
    ("nested_access", "{{ m[0].content }} {{ m[0]['tool_calls'][0].function.name }} {{ m[1].content is defined }}", {"m": [{"content": "c", "tool_calls": [{"function": {"name": "f"}}]}, {}]}),
    ("dict_methods", "{{ d.items() | list }} {{ d.keys() | list }} {{ d.values() | list }} {{ d.get('a') }} {{ d.get('z') }} {{ d.get('z', 'dflt') }}", {"d": {"a": 1, "b": [2]}}),
    ("dict_item_shadows_method", "{{ d['items'] }} {{ d.keys is defined }}", {"d": {"items": "item-value"}}),
    # string methods
    ("str_methods_case", "{{ 'Hello'.upper() }} {{ 'Hello'.lower() }} {{ 'hello wORLD'.title() }} {{ 'hello World'.capitalize() }}", {}),
    ("str_strip", "[{{ '  a b  '.strip() }}][{{ '  a '.lstrip() }}][{{ ' a  '.rstrip() }}][{{ 'xxaxx'.strip('x') }}][{{ '\\n\\t a \\n'.strip() }}]", {}),
    ("str_split", "{{ 'a b  c'.split() }} {{ 'a,b,,c'.split(',') }} {{ 'a,b,c'.split(',', 1) }} {{ 'a,b,c'.rsplit(',', 1) }} {{ '  x  y '.split() }} {{ 'a b c'.split(none, 1) }} {{ 'x</think>y'.split('</think>')[1] }}", {}),
    ("str_startswith", "{{ 'abc'.startswith('ab') }} {{ 'abc'.endswith('bc') }} {{ 'abc'.startswith(('x', 'a')) }} {{ 'abc'.endswith('x') }}", {}),
    ("str_replace_find", "{{ 'aaa'.replace('a', 'b') }} {{ 'aaa'.replace('a', 'b', 2) }} {{ 'abc'.find('c') }} {{ 'abc'.find('z') }} {{ 'abab'.count('ab') }} {{ ','.join(['a', 'b']) }}", {}),
    ("str_predicates", "{{ '123'.isdigit() }} {{ 'ab'.isalpha() }} {{ ''.isdigit() }} {{ ' '.isspace() }} {{ 'ab'.islower() }} {{ 'AB'.isupper() }}", {}),
    ("str_splitlines", "{{ 'a\\nb\\r\\nc\\n'.splitlines() }}", {}),
    # filters
    ("filter_trim", "[{{ '  a  ' | trim }}][{{ 'xxaxx' | trim('x') }}]", {}),
    ("filter_length", "{{ 'héllo' | length }} {{ [1, 2] | length }} {{ {'a': 1} | length }} {{ missing | length }} {{ [1, 2, 3] | count }}", {}),
    ("filter_string_case", "{{ 5 | string }} {{ none | string }} {{ 'AbC' | lower }} {{ 'AbC' | upper }} {{ 'hello big-world (x)' | title }} {{ 'hELLO' | capitalize }}", {}),
    ("filter_tojson", "{{ d | tojson }}", {"d": {"s": "é\"<>&'\n\t\u0001", "n": [1, 2.5, None, True, False], "e": {}, "l": []}}),
    ("filter_tojson_options", "{{ d | tojson(indent=2) }}|{{ d | tojson(sort_keys=true) }}|{{ d | tojson(separators=(',', ':')) }}|{{ 'é😀' | tojson(ensure_ascii=true) }}", {"d": {"b": [1, {"c": None}], "a": "x"}}),
    ("filter_tojson_floats", "{{ [1.0, 0.1, 1e20, 1e-7, 123456789.125] | tojson }}", {}),
    ("filter_replace", "{{ 'a-b-c' | replace('-', '+') }} {{ 'a-b-c' | replace('-', '', 1) }} {{ 'ab' | replace('', '.') }}", {}),
    ("filter_join", "{{ [1, 2, 3] | join }} {{ ['a', 'b'] | join(', ') }} {{ [{'n': 'x'}, {'n': 'y'}] | join('/', attribute='n') }}", {}),
    ("filter_first_last", "{{ [1, 2, 3] | first }} {{ [1, 2, 3] | last }} {{ 'abc' | first }} [{{ [] | first }}]", {}),
    ("filter_default", "{{ missing | default('d') }} {{ none | default('d') }} {{ '' | default('d') }} {{ '' | default('d', true) }} {{ 0 | d('z', true) }} {{ 'v' | default('d') }}", {}),
    ("filter_items", "{{ d | items | list }} {% for k, v in d | items %}{{ k }}{{ v }}{% endfor %}", {"d": {"x": 1, "y": 2}}),
    ("filter_list", "{{ 'ab' | list }} {{ {'a': 1} | list }} {{ (1, 2) | list }}", {}),
    ("filter_select", "{{ [1, 2, 3, 4] | select('odd') | list }} {{ [1, 2, 3] | reject('odd') | list }} {{ [0, 1, '', 'a'] | select | list }} {{ [1, 2, 3] | select('greaterthan', 1) | list if false else [1, 2, 3] | select('>', 1) | list }}", {}),
    ("filter_selectattr", "{{ m | selectattr('role', 'equalto', 'user') | map(attribute='c') | list }} {{ m | rejectattr('role', 'equalto', 'user') | list | length }} {{ m | selectattr('flag') | list | length }} {{ m | selectattr('role', 'in', ['tool', 'user']) | list | length }}", {"m": [{"role": "user", "c": 1}, {"role": "assistant", "c": 2, "flag": True}, {"role": "user", "c": 3}]}),
    ("filter_map", "{{ ['a', 'b'] | map('upper') | list }} {{ [{'a': {'b': 1}}, {'a': {'b': 2}}] | map(attribute='a.b') | list }} {{ [{}, {'x': 1}] | map(attribute='x', default=0) | list }}", {}),
    ("filter_sort", "{{ ['B', 'a', 'C'] | sort }} {{ ['B', 'a', 'C'] | sort(case_sensitive=true) }} {{ [3, 1, 2] | sort(reverse=true) }} {{ [{'n': 2}, {'n': 1}] | sort(attribute='n') }}", {}),
    ("filter_dictsort", "{{ d | dictsort }} {{ d | dictsort(by='value') }} {{ d | dictsort(reverse=true) }}", {"d": {"b": 1, "a": 3, "C": 2}}),
    ("filter_unique_min_max_sum", "{{ ['a', 'A', 'b'] | unique | list }} {{ [3, 1, 2] | min }} {{ [3, 1, 2] | max }} {{ ['b', 'A'] | max }} {{ [1, 2.5] | sum }} {{ [{'v': 1}, {'v': 2}] | sum(attribute='v') }}", {}),
    ("unicode_case", "{{ s | upper }}|{{ s | lower }}|{{ s.title() }}|{{ 'héllo wörld'.title() }}|{{ s is lower }}|{{ '123' is lower }}|{{ 'élan VITAL' | capitalize }}|{{ 'éa-öb (üc' | title }}|{{ 'ßa'.capitalize() }}",
     {"s": "Grüße Ærø Ĳssel ŉ ſ µ Ωμέγα άέ ΐ Привет Ёж İı"}),
    ("float_divmod_quirks", "{{ 1 // 0.1 }} {{ 1 % 0.1 }} {{ -1 // 0.1 }} {{ 5.5 % -2 }} {{ 0.0 // -1 }}", {}),
    ("round_int_stays_int", "{{ 2 | round }} {{ 2 | round(1) }} {{ true | round }} {{ 2 | round(0, 'ceil') }}", {}),
    ("odd_even_floats", "{{ 3.0 is odd }} {{ 4.0 is even }} {{ 0.1 is even }} {{ 7.5 is divisibleby 2.5 }}", {}),
    ("percent_lone_list", "{{ 'no specifiers' % [1, 2] }}", {}),
    ("filter_reverse", "{{ 'héllo' | reverse }} {{ [1, 2, 3] | reverse | list }}", {}),
    ("filter_numbers", "{{ 3.7 | int }} {{ '42' | int }} {{ 'x' | int }} {{ 'x' | int(7) }} {{ '3.5' | float }} {{ 2 | float }} {{ -3 | abs }} {{ -2.5 | abs }} {{ 2.5 | round }} {{ 3.5 | round }} {{ 3.14159 | round(2) }} {{ 3.1 | round(method='ceil') }} {{ 3.9 | round(0, 'floor') }}", {}),
    ("filter_indent", "[{{ 'a\\nb\\n\\nc' | indent(2) }}][{{ 'a\\nb' | indent(2, true) }}][{{ 'a\\n\\nb' | indent(3, blank=true) }}][{{ 'a\\nb' | indent('> ') }}]", {}),
    ("filter_escape_wordcount", "{{ '<a href=\"x\">&\\'</a>' | e }} {{ 'one two  three' | wordcount }} {{ 'x' | safe }}", {}),
    ("filter_attr_format", "{{ 'a%sb%s' | format(1, 'z') }} [{{ d | attr('k') }}]", {"d": {"k": 1}}),
    # tests
    ("tests_types", "{{ none is none }} {{ 1 is number }} {{ 1.5 is float }} {{ 1 is integer }} {{ true is integer }} {{ true is boolean }} {{ 'a' is string }} {{ {} is mapping }} {{ [] is mapping }} {{ [] is iterable }} {{ 'a' is iterable }} {{ 1 is iterable }} {{ [] is sequence }}", {}),
    ("tests_defined", "{{ x is defined }} {{ y is defined }} {{ y is undefined }} {{ x is not none }} {{ x.a is defined }} {{ x.b is defined }} {{ n is none }}", {"x": {"a": 1}, "n": None}),
    ("tests_bool", "{{ false is false }} {{ 0 is false }} {{ true is true }} {{ 1 is true }} {{ none is false }} {{ x is false }}", {"x": False}),
    ("tests_compare", "{{ 2 is equalto 2 }} {{ 2 is eq(3) }} {{ 2 is ne 3 }} {{ 3 is gt 2 }} {{ 3 is ge 3 }} {{ 1 is lt 2 }} {{ 2 is le 1 }} {{ 2 is in [1, 2] }} {{ false is sameas false }} {{ 0 is sameas false }}", {}),
    ("tests_numbers", "{{ 3 is odd }} {{ 3 is even }} {{ 9 is divisibleby 3 }} {{ 9 is divisibleby(2) }} {{ 'ab' is lower }} {{ 'AB' is upper }}", {}),
    ("tests_callable", "{{ range is callable }} {{ 'a'.strip is callable }} {{ 1 is callable }}", {}),
    ("test_not_precedence", "{{ not x is defined }} {{ x is not defined and true }}", {}),
    # globals
    ("range", "{{ range(3) | list }} {{ range(1, 6, 2) | list }} {{ range(5, 0, -2) | list }} {{ range(0) | list }}", {}),
    ("raise_exception", "{{ raise_exception('bad input: ' ~ n) }}", {"n": 3}),
    ("dict_global", "{{ dict(a=1, b='x') }}", {}),
    ("generation_block", "{% generation %}kept {{ 1 }}{% endgeneration %}", {}),
    # undefined semantics and errors
    ("undefined_renders_empty", "[{{ missing }}][{{ missing | string }}][{{ missing | lower }}][{{ missing ~ 'x' }}][{{ missing == none }}][{{ missing | list }}]", {}),
    ("error_undefined_attribute", "{{ missing.attr }}", {}),
    ("error_undefined_call", "{{ nosuchfunction(1) }}", {}),
    ("error_undefined_method", "{{ 'x'.nosuch() }}", {}),
    ("error_undefined_add", "{{ missing + 1 }}", {}),
    ("error_index_empty", "{{ messages[0]['content'] }}", {"messages": []}),
    ("error_str_plus_int", "{{ 'a' + 1 }}", {}),
    ("error_unknown_filter", "line one\n{{ x | nosuchfilter }}", {"x": 1}),
    ("error_unknown_test", "{{ x is nosuchtest }}", {"x": 1}),
    ("error_unclosed_if", "{% if x %}\nunfinished", {"x": 1}),
    ("error_unclosed_for", "{% for x in y %}{{ x }}", {}),
    ("error_unclosed_var", "{{ x ", {}),
    ("error_unclosed_comment", "{# never closed", {}),
    ("error_unknown_tag", "{% frobnicate %}", {}),
    ("error_mismatched_end", "{% if true %}{% endfor %}", {}),
    ("error_bad_expression", "{{ 1 + }}", {}),
    ("error_not_iterable", "{% for x in 5 %}{% endfor %}", {}),
    ("error_set_attr_non_namespace", "{% set d = {} %}{% set d.x = 1 %}", {}),
    ("error_division_by_zero", "{{ 1 / 0 }}", {}),
    ("error_list_append", "{% set l = [] %}{{ l.append(1) }}", {}),
    ("error_tojson_undefined", "{{ missing | tojson }}", {}),
    ("error_compare_types", "{{ 1 < 'a' }}", {}),
]

# ---------------------------------------------------------------------------------------------------
IMG = {"type": "image"}


def text(t):
    return {"type": "text", "text": t}


WEATHER_TOOL = {"type": "function", "function": {"name": "get_weather", "description": "Weather in a city.",
                "parameters": {"type": "object", "properties": {"city": {"type": "string", "description": "Name, e.g. \"Paris\""}},
                               "required": ["city"]}}}
CLICK_TOOL = {"type": "function", "function": {"name": "click", "description": "Click at (x, y) on the page.",
              "parameters": {"type": "object", "properties": {"x": {"type": "integer"}, "y": {"type": "integer"}}}}}

CONVERSATIONS = [
    ("user_only", [{"role": "user", "content": "Hello!"}], True, {}),
    ("user_only_no_prompt", [{"role": "user", "content": "Hello!"}], False, {}),
    ("system_user", [{"role": "system", "content": "You are a web agent."}, {"role": "user", "content": "Open example.com"}], True, {}),
    ("multi_turn", [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "2+2?"},
                    {"role": "assistant", "content": "4"}, {"role": "user", "content": "And 3+3?"}], True, {}),
    ("multi_turn_ends_assistant", [{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Hello, how can I help?"}], False, {}),
    ("assistant_with_think", [{"role": "user", "content": "Why?"},
                              {"role": "assistant", "content": "<think>\nLet me reason.\n</think>\n\nBecause."},
                              {"role": "user", "content": "Thanks"}], True, {}),
    ("assistant_two_thinks", [{"role": "user", "content": "Q"}, {"role": "assistant", "content": "<think>a</think>b</think>  final  "},
                              {"role": "user", "content": "Q2"}], True, {}),
    ("no_think_in_system", [{"role": "system", "content": "/no_think"}, {"role": "user", "content": "Describe the page."}], True, {}),
    ("no_think_system_with_text", [{"role": "system", "content": "You are helpful. /no_think"}, {"role": "user", "content": "Hi"}], True, {}),
    ("think_in_system", [{"role": "system", "content": "/think"}, {"role": "user", "content": "Solve it."}], True, {}),
    ("no_think_in_user", [{"role": "user", "content": "Quick answer /no_think"}], True, {}),
    ("switch_last_wins", [{"role": "system", "content": "/no_think"}, {"role": "user", "content": "First"},
                          {"role": "assistant", "content": "ok"}, {"role": "user", "content": "/think Now think."}], True, {}),
    ("enable_thinking_false", [{"role": "user", "content": "Hi"}], True, {"enable_thinking": False}),
    ("enable_thinking_true_overrides", [{"role": "system", "content": "/no_think"}, {"role": "user", "content": "Hi"}], True, {"enable_thinking": True}),
    ("thinking_kwarg_false", [{"role": "user", "content": "Localize the button."}], True, {"thinking": False}),
    ("one_image", [{"role": "user", "content": [IMG, text("What is in this screenshot?")]}], True, {}),
    ("image_after_text", [{"role": "user", "content": [text("Look: "), IMG]}], True, {}),
    ("two_images", [{"role": "system", "content": "Compare images."},
                    {"role": "user", "content": [IMG, IMG, text("Which one has the login button?")]}], True, {}),
    ("three_images_across_turns", [{"role": "user", "content": [IMG, text("Step 1")]}, {"role": "assistant", "content": "Clicked."},
                                   {"role": "user", "content": [IMG, text("Step 2"), IMG]}], True, {}),
    ("image_only", [{"role": "user", "content": [IMG]}], True, {}),
    ("text_parts_only", [{"role": "user", "content": [text("part one, "), text("part two")]}], True, {}),
    ("system_as_parts", [{"role": "system", "content": [text("Parts system /no_think")]}, {"role": "user", "content": "Hi"}], True, {}),
    ("unicode", [{"role": "user", "content": "Grüße aus Köln — 日本語 テスト 🚀 ñ"}, {"role": "assistant", "content": "Привет! ✓"},
                 {"role": "user", "content": "emoji 😀👍🏽"}], True, {}),
    ("special_chars", [{"role": "user", "content": "Quotes ' \" backslash \\ braces {{ x }} {% if %} tab\tnewline\nend"}], True, {}),
    ("whitespace_content", [{"role": "system", "content": "  padded system  "}, {"role": "user", "content": "\n\n  padded user \n"}], True, {}),
    ("empty_user", [{"role": "user", "content": ""}], True, {}),
    ("long_multi_turn", [{"role": "system", "content": "Agent."}] +
     [m for i in range(6) for m in ({"role": "user", "content": f"step {i}"}, {"role": "assistant", "content": f"<think>t{i}</think>action {i}"})] +
     [{"role": "user", "content": "final"}], True, {}),
    ("agent_json_output", [{"role": "system", "content": "Output JSON: {\"action\": \"click\", \"x\": int, \"y\": int}"},
                           {"role": "user", "content": [IMG, text("Click the search box")]},
                           {"role": "assistant", "content": "{\"action\": \"click\", \"x\": 512, \"y\": 88}"},
                           {"role": "user", "content": [IMG, text("Now type 'surf'")]}], True, {}),
    ("tools_available", [{"role": "system", "content": "Use tools."}, {"role": "user", "content": "Weather in Paris?"}], True,
     {"tools": [WEATHER_TOOL, CLICK_TOOL]}),
    ("tools_no_system", [{"role": "user", "content": "Click it"}], True, {"tools": [CLICK_TOOL]}),
    ("tool_call_and_response", [{"role": "user", "content": "Weather in Paris?"},
                                {"role": "assistant", "content": None, "tool_calls": [
                                    {"type": "function", "function": {"name": "get_weather", "arguments": {"city": "Paris"}}}]},
                                {"role": "tool", "content": "{\"temp\": 21}"},
                                {"role": "tool", "content": "{\"sky\": \"clear\"}"},
                                {"role": "assistant", "content": "21 and clear."}], False, {"tools": [WEATHER_TOOL]}),
    ("empty_messages", [], True, {}),
    ("bad_role", [{"role": "user", "content": "hi"}, {"role": "narrator", "content": "??"}], True, {}),
    ("consecutive_users", [{"role": "user", "content": "one"}, {"role": "user", "content": "two"}], True, {}),
    ("bad_part_type", [{"role": "user", "content": [{"type": "video"}, text("x")]}], True, {}),
]

TEMPLATES = {
    "chat_template_nemotron_nano_v2_vl.jinja": OUR_TEMPLATE,
    "chatml_tools.jinja": os.path.join(OUT, "chatml_tools.jinja"),
    "llama_style.jinja": os.path.join(OUT, "llama_style.jinja"),
    "mistral_style.jinja": os.path.join(OUT, "mistral_style.jinja"),
}


def render_case(template, context):
    try:
        return {"expected": _compile_jinja_template(template).render(**context)}
    except Exception as e:  # noqa: BLE001 - any jinja2 failure is an expected error for the C++ side
        return {"error": f"{type(e).__name__}: {e}"}


def render_conversation(template, messages, add_generation_prompt, extra):
    kwargs = dict(SPECIAL_TOKENS)
    kwargs.update({k: v for k, v in extra.items() if k != "tools"})
    try:
        rendered, _ = render_jinja_template(conversations=[messages], tools=extra.get("tools"), chat_template=template,
                                            add_generation_prompt=add_generation_prompt, **kwargs)
        return {"expected": rendered[0]}
    except Exception as e:  # noqa: BLE001
        return {"error": f"{type(e).__name__}: {e}"}


def write_json(name, value):
    path = os.path.join(OUT, name)
    with open(path, "w", encoding="utf-8") as f:
        json.dump(value, f, ensure_ascii=False, indent=1)
        f.write("\n")
    return path


def main():
    os.makedirs(OUT, exist_ok=True)
    cases = []
    for name, template, context in CASES:
        cases.append({"name": name, "template": template, "context": context, **render_case(template, context)})
    conversations = []
    for name, messages, add_generation_prompt, extra in CONVERSATIONS:
        conversations.append({"name": name, "messages": messages, "add_generation_prompt": add_generation_prompt, **extra})
    renders = []
    for template_name, path in TEMPLATES.items():
        with open(path, encoding="utf-8") as f:
            template = f.read()
        for name, messages, add_generation_prompt, extra in CONVERSATIONS:
            renders.append({"template": template_name, "conversation": name,
                            **render_conversation(template, messages, add_generation_prompt, extra)})
    written = [write_json("jinja_cases.json", cases), write_json("conversations.json", conversations),
               write_json("renders.json", renders)]
    lines = [f"generator: tests/reference/make_chat_template_fixture.py",
             f"python {sys.version.split()[0]}, jinja2 {jinja2.__version__}, transformers {transformers.__version__}",
             "reference: transformers render_jinja_template / _compile_jinja_template (HF chat-template environment)",
             f"special tokens: {json.dumps(SPECIAL_TOKENS)}", "seed: none (deterministic)",
             f"cases: {len(cases)} ({sum('error' in c for c in cases)} errors); conversations: {len(conversations)}; "
             f"renders: {len(renders)} ({sum('error' in r for r in renders)} errors)", "sha256:"]
    for path in written + [p for p in TEMPLATES.values()]:
        with open(path, "rb") as f:
            lines.append(f"  {hashlib.sha256(f.read()).hexdigest()}  {os.path.relpath(path, ROOT)}")
    with open(os.path.join(OUT, "manifest.txt"), "w", encoding="utf-8") as f:
        f.write("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
