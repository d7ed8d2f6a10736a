"""Fact extraction: identifiers, numbers with units, names, dates, amounts, e-mail
addresses, URLs, paths and ``key=value`` pairs of JSON, found by pattern; and the
error lines of tool output."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from ctxcli.summarizers.text import shorten

NOTE_CHARS = 200
FACT_CHARS = 60

_NOT_ALNUM_BEFORE = r"(?<![A-Za-z0-9_])"
_NOT_ALNUM_AFTER = r"(?![A-Za-z0-9_])"
#: The extensions of files a fact keeps on a name (``lead_memor_v2.txt``).
_EXTENSIONS = (
    r"(?:txt|md|rst|py|js|ts|tsx|jsx|json|jsonl|ya?ml|toml|csv|log|sh|html|css|go|rs|java"
    r"|rb|c|h|cpp|sql|xml|ini|cfg|pdf|png|jpe?g|zip|gz)"
)
_MONTHS = r"(?:Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec)"
_UNITS = (
    r"(?:kg|g|mg|lb|lbs|oz|ml|l|cl|km|m|cm|mm|mi|ft|in|gb|mb|kb|tb|ms|s|sec|min|h|hrs?"
    r"|%|mph|kwh|w|v|°c|°f|c|f)"
)
#: Chinese units after a number, each before the shorter one it opens with (``12个月``,
#: not ``12个``; ``5000日元``, not ``5000日``: the first that matches is taken).
_CJK_UNITS = (
    r"(?:(?:万|亿)(?:像素|元|人|次|台|件|公里|毫安)?|个工作日|个小时|个月|个|件|台|部|期|天"
    r"|周|月|年|工作日|日元|日|号|元|块|港币|英镑|小时|分钟|岁|人|位|次|寸|英寸|克|千克|公斤"
    r"|毫升|升|折|像素|毫安时?|平方米|平方公里|公里|英里|海里|英尺|厘米|毫米|米|%)"
)
_STOP = frozenset(
    "a an and or of to the in on at for by with from is are was were be it its this that "
    "than then as but not no so if".split()
)
#: Words that make no quantity after a number ("1 with", "0199 please"), unlike
#: "2 eggs" or "4 people".
_NOT_COUNTED = _STOP | frozenset(
    "please thanks thank now also just here there what which when where who will would "
    "can could should have has had do does did you your my our their equals equal plus "
    "minus about more less other into over under after before since until through via like "
    "onto out off around among between against without within across".split()
)
_NUMBER_WORD = re.compile(r"\d+(?:\.\d+)? ([a-z]+)")
#: What a number with a decimal point measures when a word follows it (``2.5 kg``,
#: ``1.5 hours``): a unit; other words after one (``4.1 section``) make no quantity.
_MEASURE = re.compile(
    rf"(?i){_UNITS}|(?:hour|minute|second|day|week|month|year|mile|star|point|time)s?|percent"
    r"|dollars?|euros?|yuan"
)

_PATH_START = r"(?<![\w.@/-])"
#: Words that do not name what a unit measures (``2.5 kg and``).
_GLUE = r"(?:and|but|for|from|the|then|that|this|with|are|was|were|each|per)"
_CURRENCY_CODES = ("USD", "EUR", "GBP", "CNY", "RMB")
#: (pattern, substrings one of which every match contains, or ``None``): they are
#: looked for first, so a pattern is not run over text it cannot match.
_CJK_CURRENCY = r"(?:日元|港币|英镑|元|块|美元|欧元)"
_RANGE_SEP = r"\s?(?:-|–|~|～|到|至)\s?"
#: Words that say what kind of a thing is counted, before its noun (``7 business
#: days``, ``3 free checked bags``): a quantity takes them with the noun.
_QUALIFIER = r"(?:business|working|calendar|free|checked|extra|additional|non-?free|consecutive)"
#: Adjectives before the noun a number counts (``4 key files``, ``3 new tests``, ``2
#: failed checks``): a quantity takes them with it, as its qualifiers (no ``4 key``).
_ADJECTIVE = (
    r"(?:key|main|new|old|major|minor|different|separate|important|critical|remaining"
    r"|unique|possible|simple|basic|common|related|small|large|big|open|failing|failed"
    r"|passing|other|same|similar|existing|missing|unused|duplicate|previous|recent|core"
    r"|specific|relevant|more|modified|changed|empty|active|pending|completed|valid|invalid)"
)
#: Words a qualifier or an adjective is not followed by in a quantity (``3 new and``
#: is ``3 new``).
_NOT_A_NOUN = "|".join(sorted(_NOT_COUNTED, key=len, reverse=True))
#: Nouns of a count or a span of time, after their qualifiers.
_COUNTED = (
    rf"(?:{_QUALIFIER} ){{0,2}}(?:days?|hours?|minutes?|weeks?|months?|years?|nights?|bags?"
    r"|people|persons?|passengers?|seats?|items?|times?|tickets?|flights?)(?![A-Za-z])"
)
#: A range, whole: ``$20-$30``, ``50-100元``, ``1小时-2小时``, ``3 到 5 天``, ``10-20 kg``.
_RANGE = re.compile(
    r"[$€£¥￥]\d(?:[\d,]*\d)?(?:\.\d+)?(?:\s?(?:-|–|~|～|到|至)\s?)[$€£¥￥]?\d(?:[\d,]*\d)?(?:\.\d+)?"
    # A number from its first digit, never given back (no digit follows it here):
    # where it starts no range, no later digit of it does.
    rf"|\d(?<!\d\d)\d*+(?:\.\d+)?\s?(?:{_CJK_UNITS[3:-1]})?{_RANGE_SEP}\d+(?:\.\d+)?\s?"
    rf"(?:个工作日|个月|{_CJK_CURRENCY[3:-1]}|{_CJK_UNITS[3:-1]})"
    # (?<!A)\d+ as a digit first, then the boundary: a branch quick to fail elsewhere.
    rf"|\d(?<![A-Za-z0-9_]\d)\d*(?:\.\d+)?{_RANGE_SEP}\d+(?:\.\d+)? ?{_UNITS}(?![A-Za-z])"
    # of a count or a span of time: 5 to 7 business days, 2-3 checked bags
    rf"|\d(?<![A-Za-z0-9_]\d)\d*(?:\.\d+)?(?: to |{_RANGE_SEP})\d+(?:\.\d+)? {_COUNTED}"
)
#: A street address: Chinese with its district and street (``北京市朝阳区建国路277号``),
#: or English (``975 Sunset Drive``).
_ADDRESS = re.compile(
    r"(?:[\u4e00-\u9fff]{1,6}?(?:省|市|区|县|镇))*[\u4e00-\u9fff]{1,8}?(?:路|街|道|巷|大道|胡同)"
    r"\d+(?:-\d+)?号(?:\d+(?:室|楼|栋|单元))*"
)
_STREET = re.compile(
    r"\d{1,5} [A-Z][a-z]+(?: [A-Z][a-z]+)* (?:Street|St|Avenue|Ave|Road|Rd|Drive|Dr|Lane"
    r"|Ln|Boulevard|Blvd|Way|Court|Ct|Place|Pl)\b"
)
_PHONE = re.compile(r"\+?\d{1,4}[ -]\d{3,4}[ -]\d{4}(?!\d)|(?<!\d)1[3-9]\d{9}(?!\d)")
#: An e-mail address, of ASCII letters (``\w`` would run on into the CJK text around
#: it: ``john.doe@example.com和jane.doe``).
#: Its domain ends in a label that opens with a letter (RFC 1123's top-level domains
#: are never all digits): ``react@18.2.0`` is a package's version (:data:`_PACKAGE`), no address.
_EMAIL = re.compile(
    r"[A-Za-z0-9_.+-]+@[A-Za-z0-9_-]+(?:\.[A-Za-z0-9_-]+)*\.[A-Za-z][A-Za-z0-9-]*[A-Za-z0-9]"
    r"(?![A-Za-z0-9_])"
)
#: A package at a version, whole: npm's ``@types/node@20.11.5``, ``react@18.2.0``,
#: pip's ``pytest==8.3.2``, ``numpy>=1.26``; not read from tool output
#: (:data:`_STRICT_PATTERNS`).
_PACKAGE = re.compile(
    r"(?<![\w@/.-])(?:@[a-z0-9][\w.-]*/)?[A-Za-z0-9][\w.-]*(?:@|==|~=|>=)[\^~]?v?\d+"
    r"(?:\.\d+)*(?:-[0-9A-Za-z.]*[0-9A-Za-z])?"
)
#: What ends the clause before a phone number or an e-mail address; the words that
#: may stand between its owner and it.
_CLAUSE_END = re.compile(r".*[，。,;；!?！？\n:：]")
_OWNER_GLUE = re.compile(
    r"(?:\s|[（(：:、]|是|为|和|与|或|及|的电话|电话|手机|邮箱"
    r"|\b(?:at|is|email|e-mail|phone|number|or|and)\b)+$"
)
#: Who an English phone number or address belongs to: the capitalised words (a name)
#: or the possessive that end its clause.
_OWNER_EN = re.compile(r"(?:\b[A-Z][a-z]+(?: [A-Z][a-z]+)*|\b(?:my|his|her|their|our|your))$")
#: Words of a request that open an address match but are not part of it.
_ADDRESS_LEAD = re.compile(r"^(?:寄到|送到|发到|运到|寄往|送往|地址是|地址为|住在|在|到)")
#: What follows a number that is part of a name (``7天连锁酒店``), not a quantity.
_NAME_AFTER = re.compile(
    r"[\u4e00-\u9fff]{0,3}(?:连锁|酒店|宾馆|旅馆|公司|集团|商城|超市|药房|便利店)"
)
#: What a pattern needs in a text before it is run: substrings one of which every
#: match contains, or a pattern that opens with a digit (so it is quick to search
#: for) and that every text with a match holds; ``None``: nothing.
Needs = tuple[str, ...] | re.Pattern[str] | None
#: A UUID (RFC 9562's 8-4-4-4-12 hex digits), whole: the ids and number patterns
#: would take one whose first group is all digits as a number and the rest.
_UUID = re.compile(r"(?<![\w-])[0-9a-fA-F]{8}(?:-[0-9a-fA-F]{4}){3}-[0-9a-fA-F]{12}(?![\w-])")
_UUID_FACT: tuple[re.Pattern[str], Needs] = (_UUID, ("-",))
#: An order number (``#4821``): the first of the patterns tool output is not read for
#: (:data:`_STRICT_PATTERNS`).
_ORDER_NUMBER: tuple[re.Pattern[str], Needs] = (re.compile(r"#\d+"), ("#",))
#: A path: absolute, relative, or a file with an extension.
PATH = re.compile(
    rf"{_PATH_START}(?:~|\.{{1,2}}|[\w.-]+)?(?:/[\w.@-]+){{2,}}/?"
    rf"|{_PATH_START}[\w.-]+/[\w.@/-]*\.\w{{1,5}}\b"
)
FACT_PATTERNS: tuple[tuple[re.Pattern[str], Needs], ...] = (
    (_EMAIL, ("@",)),
    (re.compile(r"https?://[^\s\"'<>)]+"), ("://",)),  # URL
    (PATH, ("/",)),
    _UUID_FACT,
    (re.compile(r"\d{4}-\d{2}-\d{2}(?:[T ]\d{2}:\d{2}(?::\d{2})?)?"), ("-",)),  # ISO date
    (_ADDRESS, ("号",)),
    (_STREET, re.compile(r"\d [A-Z][a-z]+ ")),
    (_RANGE, re.compile(r"\d\s?\S{0,4}?\s?(?:-|–|~|～|到|至)\s?[$€£¥￥]?\d|\d to \d")),
    (
        # The month first and its boundary after it: a pattern that opens with a
        # literal is searched for quickly.
        # A day has no third digit: "June 2024" is a month and its year, no June 20.
        re.compile(
            rf"{_MONTHS}(?<![A-Za-z0-9_]\w{{3}})[a-z]*\.? "
            r"(?:\d{1,2}(?!\d)(?:,? \d{4}(?!\d))?|\d{4}(?!\d))"
        ),
        ("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"),
    ),  # May 15, May 15, 2024, June 2024
    (
        re.compile(r"\d{4} ?年 ?\d{1,2} ?月(?: ?\d{1,2} ?[日号])?|\d{1,2} ?月 ?\d{1,2} ?[日号]"),
        ("月",),
    ),  # 6月18日
    (
        # a year or a century with its era, whole: 公元前700年 (700 BC) is no 700年, nor
        # is the short 前221年 (of three or four digits, 前 no part of a word such as
        # 之前 or 目前: 前3年 is "the first 3 years") a 221年; 公元前3世纪. After a
        # number, BC of two digits or more, AD and CE of three or more, none that goes
        # on (``10 AD units``, ``500 CE-certified``, ``1999 AD/DC`` are no years)
        re.compile(
            r"公元前? ?\d{1,4} ?(?:年|世纪)|(?<![之以提目当先此从眼面生事日向空])前\d{3,4} ?年"
            r"|(?<![之以提目当先此从眼面生事日向空])前\d{1,2} ?世纪"
            r"|\b(?:AD|A\.D\.) ?\d{1,4}\b"
            r"|\b(?:\d{2,4} ?(?:BCE|BC|B\.C\.(?:E\.)?)|\d{3,4} ?(?:CE|AD|A\.D\.))"
            r"(?![-/\w])"
        ),
        ("公元", "前", "BC", "AD", "CE", "B.C", "A.D"),
    ),
    (_PHONE, re.compile(r"\d(?:[ -]\d{3}|\d{10})")),
    (
        re.compile(r"(?:[$€£¥￥]|(?:USD|EUR|GBP|CNY|RMB) ?)\d(?:[\d,]*\d)?(?:\.\d+)?"),
        ("$", "€", "£", "¥", "￥", *_CURRENCY_CODES),
    ),  # $1.50
    (
        re.compile(
            rf"\d[\d,]*(?:\.\d+)?\s?(?:{_CJK_CURRENCY[3:-1]}|USD|EUR|GBP|CNY|RMB|dollars?"
            r"|euros?|yuan)"
        ),
        ("元", "块", "港币", "英镑", "dollar", "euro", "yuan", *_CURRENCY_CODES),
    ),
    (
        # a product's model: a name with a hyphen or an inner capital and its number
        # (X-Pro 2026, iPhone 15, MacBook 14), whole: no year, no count
        re.compile(
            r"(?<![\w-])(?:[A-Z][A-Za-z]*-[A-Z][A-Za-z]*|[a-z]+[A-Z][A-Za-z]*"
            r"|[A-Z][a-z]+[A-Z][A-Za-z]*) \d{1,4}(?!\w|[.,]\d)"
        ),
        re.compile(r"[A-Za-z] \d"),
    ),
    (
        # a version with a pre-release after its numbers (3.0.0rc4, 1.2.3b1,
        # 2.10.4-rc1, 1.0.0-beta.2), whole
        re.compile(rf"(?<![\w.])\d+(?:\.\d+)+-?[a-z]+(?:\.?\d+)?{_NOT_ALNUM_AFTER}"),
        (".",),
    ),
    (
        # (?<!A)#?[A-Za-z] as a letter or "#" first, then the boundary before it, and
        # after a "#" a letter (as the next pattern); a file's extension stays on
        # (lead_memor_v2.txt).
        re.compile(
            r"[#A-Za-z](?<![A-Za-z0-9_].)(?:(?<=#)[A-Za-z]|(?<!#))"
            rf"[A-Za-z_-]*\d[A-Za-z0-9_-]*(?:\.\d+)*(?:-?[a-z]+(?:\.?\d+)?)?(?:\.{_EXTENSIONS})?"
            rf"{_NOT_ALNUM_AFTER}"
        ),
        None,
    ),  # ids, versions (pytest-8.3.2, v3.0.0rc4)
    (
        # (?<!A)#?\d+ as a digit or "#" first (searched for quickly), then the boundary
        # before it, and after a "#" a digit.
        re.compile(
            r"[#\d](?<![A-Za-z0-9_].)(?:(?<=#)\d|(?<!#))\d*"
            rf"[A-Za-z][A-Za-z0-9_-]*\d[A-Za-z0-9_-]*{_NOT_ALNUM_AFTER}"
        ),
        None,
    ),
    _ORDER_NUMBER,
    # not read from tool output, whose dumps of pins (a setup.py, a lock file) would
    # crowd out its paths
    (_PACKAGE, ("@", "==", "~=", ">=")),
    # a number of four or more digits, with its decimal fraction (``1234.5``, never
    # ``1234`` of it: a balance or a distance cut there is a wrong one), not a
    # decimal's fraction (``0686`` of ``7.0686``) nor a part of a dotted run
    # (``192.168.1.1``, ``2024.05.20``: their first number alone, as before)
    (
        re.compile(
            rf"\d(?<![A-Za-z0-9_]\d)(?<!\d\.\d)\d{{3,}}(?:\.\d++(?!\.\d))?{_NOT_ALNUM_AFTER}"
        ),
        None,
    ),
    (
        # quantities: 2.5 kg, 3 天, 2 eggs, 4 people. A number is read from its first
        # digit and never given back (no digit starts what follows it): where it is
        # no quantity, no later digit of it starts one either.
        re.compile(
            rf"\d(?<!\d\d)(?<!\d[,.:]\d)\d*+(?:,\d{{3}})*+(?:\.\d+)?"
            rf"(?:(?i: ?{_UNITS}(?: (?!{_GLUE}\b)[a-z]{{3,12}})?(?![A-Za-z]))"
            rf"| ?{_CJK_UNITS}| (?:(?:{_QUALIFIER}|{_ADJECTIVE}) (?!(?:{_NOT_A_NOUN})\b)){{0,2}}"
            r"[a-z]{3,12}(?![A-Za-z-]))"
        ),
        None,
    ),
)
#: The patterns that can match text without a digit (e-mail, URL, path): those before
#: the UUID's.
_NO_DIGIT_PATTERNS = FACT_PATTERNS[: FACT_PATTERNS.index(_UUID_FACT)]
#: What is read from tool output that is not JSON (logs, code, file dumps): addresses,
#: paths, dates, amounts and identifiers, not bare numbers, quantities or names: the
#: patterns before the order number's.
_STRICT_PATTERNS = FACT_PATTERNS[: FACT_PATTERNS.index(_ORDER_NUMBER)]
_DIGIT = re.compile(r"\d")
_CJK_CHAR = re.compile(r"[\u4e00-\u9fff]")
FACT_SCAN_CHARS = 4000
#: The rest of the word the scan's end falls in (at most 200 characters more), which
#: the scan reads too: a path cut there is no path (``src/agents/plugins/openc``).
_CUT_WORD = re.compile(r"\S{0,200}")
ERROR_SCAN_CHARS = 20000
FACTS_PER_MESSAGE = 12
_SHAPE_DIGITS = re.compile(r"\d+")
#: Claude Code's wrapper of a failed tool call's result.
_TOOL_USE_ERROR = re.compile(r"</?tool_use_error>")
_ERROR_WORDS = (
    "Error",
    "Exception",
    "Traceback",
    "FAILED",
    "error:",
    "fatal:",
    "panic:",
    "<tool_use_error>",
    "command not found",
    "No such file",
    "Permission denied",
)
_ERROR_LINE = re.compile(
    r"^.*(?:\b\w*(?:Error|Exception)\b|\bTraceback\b|\bFAILED\b|\b(?:error|fatal|panic):"
    r"|<tool_use_error>|command not found|No such file or directory|Permission denied).*$",
    re.MULTILINE,
)
#: A line of source code or a document shown by a tool that names an error type
#: without reporting one: a line of a numbered file view (``36:     raise
#: RuntimeError``, ``25: Raises ValueError if ...``, Claude Code's ``85→- error: Error
#: messages``), code in a diff or a grep hit (``+ raise KeyError(k)``), a Markdown
#: heading or bold label, a tree's entry.
_CODE_LINE = re.compile(
    r"^\s*\d+[:|→]"
    r"|^\s*(?:[\w./-]*:\d+[:|-]?\s*)?[+-]?\s*"
    r"(?:raise|raises|except|class|def|import|catch|throw|throws|elif)\b"
    # a statement that throws or builds one: ``if (n < 3) throw new Error('x');``
    r"|.*?\b(?:throw|raise|new) +(?:new +)?\w*(?:Error|Exception)\b"
    # a Markdown heading (``### Error Handling``) or bold label, a tree's entry
    # (``├── KeyError``), a line that opens a block or ends a statement (``error: {``)
    r"|\s*#{1,6} |[\s│]*[├└]──|\s*(?:[-*] )?\*\*[^*]+\*\*:?\s*$|.*[{\[;]\s*$",
    re.IGNORECASE,
)
#: Names: two or more capitalised words inside a sentence ("New York", "Mia Li"), or
#: one after a word that introduces a place or person ("from Austin", "to Oslo") -
#: a lone capitalised word elsewhere is too often just a word ("Would", "Price"). Words
#: right before an id of capitals and digits label it, and the id is the fact ("go
#: with Flight HAT072", "Reservation ZFA04Y"): no name.
_BEFORE_AN_ID = r"(?! (?=[A-Z0-9]*[A-Z])[A-Z0-9]*\d[A-Z0-9]*(?![\w/:-]|[.,]\d))"
#: A name ends where its word does: not the head of ``PostCSS`` or of ``Next.js``.
_WORD_ENDS = r"(?!\w|\.\w)"
_NAME = re.compile(
    rf"(?<=[a-z,;:] )([A-Z][a-z]++(?: [A-Z][a-z]++)++){_WORD_ENDS}{_BEFORE_AN_ID}"
    r"|\b(?:in|to|from|at|near|via|with|for|named|called|by) "
    rf"([A-Z][a-z]++(?: [A-Z][a-z]++)*+){_WORD_ENDS}{_BEFORE_AN_ID}"
)
#: Keys of a state rather than a thing: their values say something only of an item
#: the summary names (see :func:`json_facts`).
_STATUS_KEY = re.compile(r"(?:^|_)(?:status|state)$", re.IGNORECASE)
_JSON_KEYS = re.compile(
    r"(?:^|_)(?:id|name|number|date|time|amount|price|total|status|email|phone|city|origin|"
    r"destination|code|order|reservation|flight|cabin|payment|balance|address|zip)(?:$|_|s$)",
    re.IGNORECASE,
)


def facts(text: str, *, strict: bool = False) -> list[str]:
    """Identifiers, numbers, names, dates and amounts found in ``text``, in order;
    ``strict`` keeps to addresses, paths, dates, amounts and identifiers.

    A range is one fact, whole (``50-100元``, ``$20-$30``, ``1小时-2小时``), and so is
    a spec (``16GB+512GB``); a street address keeps its street (``建国路277号``); a
    number inside a name (``7天连锁酒店``) is no quantity; a phone number or an e-mail
    address keeps the words before it that say whose it is (``快递员张师傅
    138-0000-1234``); a path a span of code quotes keeps its spaces
    (``~/Library/Application Support/opencode/``). A fact longer than
    :data:`FACT_CHARS` is cut, but for a hash (:data:`_HEX_ID`). Only the first
    :data:`FACT_SCAN_CHARS` characters are read, and the rest of the word there
    (:data:`_CUT_WORD`): past that, a message is a dump whose facts a summary cannot
    hold anyway.
    """
    cut = _CUT_WORD.match(text, FACT_SCAN_CHARS) if len(text) > FACT_SCAN_CHARS else None
    text = text[: cut.end()] if cut else text
    result: list[str] = []
    end = -1
    for start, fact in _matches(text, strict):
        if start < end or fact.lower() in _STOP:
            continue  # inside a longer fact found at an earlier position
        if _no_quantity(fact) or _falling(fact) or _numbered(text, start, fact):
            continue  # a number and the next word (``4.1 section``), not a quantity
        previous, end = max(end, 0), start + len(fact)
        if fact[-1:] in "天号个" and _NAME_AFTER.match(text, end):
            continue  # a name holding a number: 7天连锁酒店
        fact, end = _whole_fact(text, start, fact, previous)
        if _UNIT_QUANTITY.fullmatch(fact):
            fact, end = _specified(text, fact, end)
        if "/" in fact:
            fact = _TRAILING.sub("", fact)  # the sentence's end: see /src/main.py.
        elif _BARE.fullmatch(fact):
            fact = _labelled(text, start, fact, previous)
        result.append(fact if _HEX_ID.fullmatch(fact) else shorten(fact, FACT_CHARS))
    return result


#: A hash or an id made of one (a sha256 digest, a Docker container's id: 64 hex
#: digits), kept whole past :data:`FACT_CHARS`: cut with "…" it names nothing.
_HEX_ID = re.compile(r"[0-9a-f]{40,64}")


#: A quantity in a Latin unit (``16GB``, ``100W``), and ``+`` and another after one:
#: ``12GB+256GB`` is one spec, a phone's memory and storage (:func:`_specified`).
_IN_A_LATIN_UNIT = r"\d+(?:\.\d+)?\s?(?:[KMGT]B|W|mAh|Hz|kWh)"
_UNIT_QUANTITY = re.compile(_IN_A_LATIN_UNIT, re.IGNORECASE)
_SPEC_NEXT = re.compile(rf"\+{_IN_A_LATIN_UNIT}", re.IGNORECASE)


#: What may not follow a spec (:func:`_specified`): a word of what it is of, which the
#: last quantity keeps as a fact of its own (``8GB+8GB RAM``: ``8GB; 8GB RAM``), or an
#: equals sign (``2GB+2GB=4GB`` is a sum).
_NOT_A_SPEC_END = re.compile(r" ?[A-Za-z=]")


def _specified(text: str, fact: str, end: int) -> tuple[str, int]:
    """``(fact, end)``: a quantity of :data:`_UNIT_QUANTITY` ending at ``end`` of
    ``text`` with the quantities ``+`` joins to it (``12GB+256GB``: apart, ``12GB;
    256GB`` did not say they are one model's, nor which is which), and where it ends;
    as it is when the spec ends in :data:`_NOT_A_SPEC_END`."""
    joined, after = fact, end
    while spec := _SPEC_NEXT.match(text, after):
        joined, after = joined + spec.group(), spec.end()
    return (fact, end) if _NOT_A_SPEC_END.match(text, after) else (joined, after)


#: A version or a number a summary shows with what it is of (:func:`_labelled`).
_BARE = re.compile(r"v?\d+(?:\.\d+)+(?:-?[a-z]+(?:\.?\d+)?)?|v\d+|\d{3,}")
#: What a version is of: the name before it, with a verb of change and a
#: preposition between (``Next.js upgraded to v15.5.2``, ``React to v19.1.0``,
#: ``Tailwind CSS v4``); what a number is of: a port, a line, a pull request, a process
#: (``port 3001``, ``line 1474``).
_VERSION_OF = re.compile(
    r"(?<![\w.@/-])((?:(?:@[a-z][\w.-]*/)?[A-Z][\w.+-]+|[a-z][\w-]*\.js)(?: [A-Z][A-Za-z]+)?)"
    r"(?: (?:upgraded|updated|bumped|pinned|downgraded|moved|set) (?:to|at|from)| to| is)?"
    r" \(?$"
)
_NUMBER_OF = re.compile(r"\b(port|line|PR|pid|build|issue|ticket|row|column) \(?#?$", re.I)
#: Capitalised words that open a sentence or a clause rather than name a thing.
_NOT_A_NAME = frozenset(
    "The This That It Its A An And But Or If Maybe So Also Yes No Please Hi Hello We You He "
    "She They Am Is Are Was Were Error Warning Note From To At On In Of For With Mr Ms Dr "
    "Version Step Then Now Use Using Bump Bumped "
    "Update Updated Upgrade Upgraded Install Installed Set Run Pin Pinned Move Moved "
    "Release Released Require Requires Required Need Needs Switch Switched".split()
)


def _labelled(text: str, start: int, fact: str, previous: int) -> str:
    """``fact``, a version or a number at ``start`` of ``text``, after the name of
    what it is of (:data:`_VERSION_OF`, :data:`_NUMBER_OF`: ``Next.js v15.5.2``,
    ``port 3001``), which ends no earlier than ``previous`` (the end of the fact
    before it); ``fact`` alone when no such name stands before it: a bare
    ``v15.5.2`` or ``3001`` tells nothing of what changed."""
    before = text[max(previous, start - 40) : start]
    label = _NUMBER_OF.search(before) if fact[0].isdigit() and "." not in fact else None
    if label is not None:
        return f"{label.group(1)} {fact}"
    named = _VERSION_OF.search(before) if not fact.isdigit() else None
    words = named.group(1).split() if named else []
    while words and words[0] in _NOT_A_NAME:
        words.pop(0)  # ``Use Node v20.11.1``: Node's version
    return " ".join([*words, fact])


#: A number and the word after it (a quantity's shape), and what numbers a step or
#: a part (``Step 1 write the test``, ``Phase 4 proposal``): no quantity.
_QUANTITY = re.compile(r"\d+(?:\.\d+)? [a-z]")
_ORDINAL = re.compile(
    r"(?i)\b(?:step|phase|part|stage|option|item|section|chapter|page|line|round|level|task"
    r"|issue|no\.|number) $"
)


def _numbered(text: str, start: int, fact: str) -> bool:
    """Whether ``fact`` at ``start`` of ``text`` is a number and the word after it that
    a step or a part is numbered by (:data:`_ORDINAL`: ``Step 1 write the test``): no
    quantity; the number alone may still be a fact (``line 1474`` of ``line 1474
    column 12``)."""
    return bool(_QUANTITY.match(fact)) and bool(_ORDINAL.search(text, max(0, start - 8), start))


#: The punctuation after a path or URL that ends the sentence it is in.
_TRAILING = re.compile(r"(?<=\w)[.,;:!?]+$")


def _whole_fact(text: str, start: int, fact: str, previous: int) -> tuple[str, int]:
    """``(fact, end)``: a ``fact`` found at ``start`` of ``text`` made whole (see
    :func:`facts`), and where it ends there; ``previous``: where the fact before it
    ended."""
    end = start + len(fact)
    if (len(fact) >= 10 and _PHONE.fullmatch(fact)) or ("@" in fact and _EMAIL.fullmatch(fact)):
        return _owned(text, start, fact, previous), end
    if fact.endswith("号") and _ADDRESS.fullmatch(fact):
        return _ADDRESS_LEAD.sub("", fact), end
    if text[start - 1 : start] == "`" and "/" in fact:
        spaced = _SPACED_PATH.match(text, start)  # `~/Library/Application Support/x/`
        return (spaced.group(), spaced.end()) if spaced else (fact, end)
    return fact, end


#: A path with spaces in it, as a span of code quotes it whole (its closing backtick
#: after it): ``~/Library/Application Support/opencode/storage/``.
_SPACED_PATH = re.compile(r"[\w.~-]*/[\w.@/~-]*(?: [\w.@~-]+[\w.@/~-]*)+(?=`)")


#: The two ends of a range (:data:`_RANGE`).
_ENDS = re.compile(r"\d[\d,]*(?:\.\d+)?")


def _falling(fact: str) -> bool:
    """Whether ``fact``, read as a range, has a second end below its first: ``$833 -
    $500`` is a subtraction (its amounts are facts each), not a range; ``$20-$30`` is."""
    ends = _ENDS.findall(fact)
    if len(ends) != 2 or not _RANGE.fullmatch(fact):
        return False
    low, high = (float(end.replace(",", "")) for end in ends)
    return high < low


def _no_quantity(fact: str) -> bool:
    """Whether ``fact``, a number and a word, is none: the word is no thing counted
    (:data:`_NOT_COUNTED`), or the number has a decimal point and the word is no unit
    (:data:`_MEASURE`)."""
    counted = _NUMBER_WORD.fullmatch(fact)
    if counted is None:
        return False
    word = counted.group(1)
    return word in _NOT_COUNTED or ("." in fact and not _MEASURE.fullmatch(word))


def _matches(text: str, strict: bool) -> list[tuple[int, str]]:
    """``(start, match)`` of every fact pattern (and name) in ``text``, by position
    and the longest first."""
    found: list[tuple[int, str]] = []
    if not _DIGIT.search(text):
        patterns = _NO_DIGIT_PATTERNS
    else:
        patterns = _STRICT_PATTERNS if strict else FACT_PATTERNS
    holds = text.__contains__
    for pattern, needs in patterns:
        if needs is None or (
            needs.search(text) if isinstance(needs, re.Pattern) else any(map(holds, needs))
        ):
            found += [(m.start(), m.group().strip()) for m in pattern.finditer(text)]
    if not strict:
        for m in _NAME.finditer(text):
            group = 1 if m.group(1) else 2
            found.append((m.start(group), m.group(group)))
    found.sort(key=lambda item: (item[0], -len(item[1])))
    return found


def _owned(text: str, start: int, fact: str, after: int = 0) -> str:
    """``fact`` (a phone number or e-mail address at ``start``) after the words that
    say whose it is: the end of its clause, at most 8 CJK characters or 3 words, none
    before ``after`` (the end of the fact before it)."""
    before = text[max(after, start - 40) : start]
    clause = _CLAUSE_END.sub("", before.replace("\n", "。"))
    clause = _OWNER_GLUE.sub("", clause).strip()
    if not clause:
        return fact
    if _CJK_CHAR.search(clause[-1]):
        return f"{clause[-6:]} {fact}"
    owner = _OWNER_EN.search(clause)
    return f"{owner.group()} {fact}" if owner else fact


def json_facts(value: Any, limit: int = 12) -> list[str]:
    """``key=value`` pairs of a parsed JSON value whose key names an id, name, date,
    amount, status or the like (at most ``limit``). The status of an item in a list
    (a to-do list's ``status=pending``, a flight list's ``status=available``) is left
    out: the item it belongs to is not said, so it tells nothing."""
    out: list[str] = []

    def walk(node: Any, in_list: bool) -> None:
        if len(out) >= limit:
            return
        if isinstance(node, Mapping):
            for key, item in node.items():
                if isinstance(item, (str, int, float)) and not isinstance(item, bool):
                    if in_list and _STATUS_KEY.search(str(key)):
                        continue
                    if _JSON_KEYS.search(str(key)) and len(str(item)) <= FACT_CHARS:
                        out.append(f"{key}={item}")
                else:
                    walk(item, in_list)
        elif isinstance(node, list):
            for item in node:
                walk(item, True)

    walk(value, False)
    return out[:limit]


#: An error named as a topic, not reported: ``Error handling``, ``custom error
#: classes``, ``exception types`` (a report reads ``Error: …``, ``ValueError``).
_ERROR_TOPIC = re.compile(
    r"\b(?:[Ee]rror|[Ee]xception)s? (?:handling|handlers?|class(?:es)?|messages?|types?"
    r"|codes?|cases?|context|boundar(?:y|ies)|recovery|reporting|paths?|states?|pages?"
    r"|logging|tracking)\b"
)

#: Names a line lists in code spans or brackets (``(`AppError`, `NpmError`)``).
_LISTED = re.compile(r"`[^`\n]*`|\([^()\n]*\)")


def _only_a_topic(line: str) -> bool:
    """Whether ``line`` names errors only as a topic (:data:`_ERROR_TOPIC`): without
    those words, and the names it lists in code spans or brackets (``Custom error
    classes (`AppError`)``), it reports none."""
    if not _ERROR_TOPIC.search(line):
        return False
    rest = _LISTED.sub("", _ERROR_TOPIC.sub("", line))
    return _ERROR_LINE.fullmatch(rest) is None


def error_lines(text: str, limit: int = 3) -> list[str]:
    """Up to ``limit`` lines of ``text`` that report an error (an ``...Error`` or
    ``...Exception`` name, ``Traceback``, ``FAILED``, ``error:``, ``fatal:``, Claude
    Code's ``<tool_use_error>``), shortened: what an agent learned from its mistakes. A
    line that ends in a colon ("failed due to the following issue:") takes the next
    line with it, which says what the error was."""
    text = text[:ERROR_SCAN_CHARS]
    if not any(word in text for word in _ERROR_WORDS):
        return []
    found: list[str] = []
    for match in _ERROR_LINE.finditer(text):
        if _CODE_LINE.match(match.group()) or _only_a_topic(match.group()):
            continue  # code or a topic that names an error, not an error that happened
        line = match.group().strip()
        if line.endswith(":") and not line.startswith("Traceback"):
            after = text[match.end() + 1 :].partition("\n")[0].strip()
            if after and not _ERROR_LINE.fullmatch(after):  # else it is listed itself
                line = f"{line} {after}"
        line = shorten(_TOOL_USE_ERROR.sub("", line).strip(), NOTE_CHARS)
        if line not in found:
            found.append(line)
        if len(found) >= limit:
            break
    return found
