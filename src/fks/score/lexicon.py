"""Word lists the five-label scorer uses (rules R2, R5, R6, R7, R8, R9 of :mod:`fks.score`).

Every phrase here is written in natural spelling and compared after the scorer's own
normalisation (:func:`fks.score.match.norm`: NFKC, casefold, diacritics dropped, curly
apostrophes straightened), so ``weiß`` and ``weiss``, ``sé`` and ``se`` are the same entry.
"""

from __future__ import annotations

#: R2 -- leading articles removed from an alias to form an extra matching variant
#: (``The Hague`` also matches ``Hague``). Spaced articles take a following space; elided ones
#: (``l'``) attach directly.
ARTICLES: tuple[str, ...] = (
    # en
    "the", "a", "an",
    # fr
    "le", "la", "les", "un", "une",
    # es
    "el", "los", "las", "una",
    # de
    "der", "die", "das", "den", "dem", "des", "ein", "eine",
)
ELIDED_ARTICLES: tuple[str, ...] = ("l'", "d'")

#: R5 -- negation cues in spaced scripts, matched on word boundaries. A cue negates the
#: nearest candidate that follows it closely (see :mod:`fks.score`, R5).
NEGATION_WORDS: tuple[str, ...] = (
    # en
    "not", "never", "no", "neither", "nor", "cannot", "isnt", "wasnt", "arent", "dont",
    "doesnt", "didnt", "rather than", "instead of",
    # fr
    "pas", "non", "ni", "jamais", "aucun", "aucune", "au lieu de", "plutot que",
    # es
    "nunca", "en lugar de", "en vez de",
    # de
    "nicht", "kein", "keine", "keinen", "keiner", "weder", "noch", "statt", "anstatt",
    "anstelle von",
    # ru
    "не", "нет", "ни", "никогда", "вместо",
)
#: R5 -- the English contraction ``n't`` (``isn't``, ``wasn't``), matched as a word suffix.
NEGATION_SUFFIX = "n't"
#: R5 -- negation cues in CJK, matched as substrings.
NEGATION_CJK: tuple[str, ...] = (
    "不是", "并非", "並非", "并不是", "並不是", "而不是", "不在", "不叫", "不属于", "不屬於",
    "没有", "沒有",
)
#: R5 -- words that end a negation's scope (contrast), besides clause punctuation.
CONTRAST_WORDS: tuple[str, ...] = (
    "but", "mais", "pero", "sino", "aber", "sondern", "но", "а", "而是", "但是", "但", "是",
)

#: R8 -- abstention phrases, matched on word boundaries (substring in CJK).
ABSTENTION: tuple[str, ...] = (
    # en
    "i don't know", "i do not know", "don't know", "dont know", "do not know",
    "i'm not sure", "i am not sure", "not sure", "unsure", "i'm not certain",
    "i am not certain", "unknown", "not known", "cannot answer", "can't answer",
    "unable to answer", "cannot be determined", "cannot determine", "can't determine",
    "cannot say", "can't say", "no idea", "no answer", "n/a",
    # zh
    "不知道", "无法回答", "無法回答", "不清楚", "不确定", "不確定", "未知", "无法确定",
    "無法確定", "不晓得", "不曉得", "不能回答", "没有答案", "沒有答案",
    # fr
    "je ne sais pas", "je ne le sais pas", "sais pas", "aucune idée", "inconnu", "inconnue",
    "je ne suis pas sûr", "je ne suis pas sûre", "je ne peux pas répondre",
    "impossible de répondre",
    # es
    "no lo sé", "no sé", "no estoy seguro", "no estoy segura", "desconocido", "desconocida",
    "no puedo responder", "no puedo contestar", "ni idea", "no tengo idea",
    # de
    "ich weiß nicht", "ich weiß es nicht", "weiß ich nicht", "weiß nicht", "keine ahnung",
    "unbekannt", "nicht bekannt", "ich bin mir nicht sicher", "ich bin nicht sicher",
    "kann ich nicht beantworten", "kann nicht beantwortet werden",
    # ru
    "не знаю", "я не знаю", "не уверен", "не уверена", "неизвестно", "не могу ответить",
    "понятия не имею", "нет данных", "затрудняюсь ответить",
)

#: R7 -- words that join alternatives ("Paris or Lyon").
DISJUNCTIONS: tuple[str, ...] = ("or", "ou", "o", "oder", "или", "либо")
DISJUNCTIONS_CJK: tuple[str, ...] = ("或者", "还是", "還是", "或")
#: R7 -- words that join a list ("Paris and Lyon").
CONJUNCTIONS: tuple[str, ...] = ("and", "et", "y", "und", "и")
CONJUNCTIONS_CJK: tuple[str, ...] = ("以及", "和", "与", "與", "及")
#: R7 -- filler words dropped from an alternative before it is compared ("maybe Lyon").
FILLERS: tuple[str, ...] = (
    "either", "maybe", "perhaps", "probably", "possibly", "also", "i think", "it is", "it's",
    "its", "is", "peut-être", "peut-etre", "soit", "tal vez", "quizás", "quizas", "quizá",
    "vielleicht", "entweder", "может быть", "возможно", "либо", "也许", "可能", "是",
)

#: R6 -- month names (en, fr, es, de, ru nominative and genitive) for full-date parsing.
MONTHS: dict[int, tuple[str, ...]] = {
    1: ("january", "jan", "janvier", "enero", "januar", "jänner", "январь", "января"),
    2: ("february", "feb", "février", "febrero", "februar", "февраль", "февраля"),
    3: ("march", "mar", "mars", "marzo", "märz", "март", "марта"),
    4: ("april", "apr", "avril", "abril", "апрель", "апреля"),
    5: ("may", "mai", "mayo", "май", "мая"),
    6: ("june", "jun", "juin", "junio", "juni", "июнь", "июня"),
    7: ("july", "jul", "juillet", "julio", "juli", "июль", "июля"),
    8: ("august", "aug", "août", "agosto", "август", "августа"),
    9: ("september", "sep", "sept", "septembre", "septiembre", "setiembre", "сентябрь",
        "сентября"),
    10: ("october", "oct", "octobre", "octubre", "oktober", "октябрь", "октября"),
    11: ("november", "nov", "novembre", "noviembre", "ноябрь", "ноября"),
    12: ("december", "dec", "décembre", "diciembre", "dezember", "декабрь", "декабря"),
}
