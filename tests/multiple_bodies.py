"""Hand-written continuations of MultiPL-E prompts (HumanEval reworded) for the runner tests:
for each language, two problems, each with a right and a wrong body (appended to the stripped
prompt, cut before the stop token, as a model's post-processed completion would be).

PHP's HumanEval_23 declares `function strlen`, which PHP refuses (a builtin): it can never
pass, so PHP uses HumanEval_55_fib. C#'s prompts have the signature inside a comment, so its
bodies declare the method again (test_multiple.py covers the body-only case)."""

ADD, STRLEN, FIB = "HumanEval_53_add", "HumanEval_23_strlen", "HumanEval_55_fib"

BODIES = {  # lang -> {problem: (right, wrong)}
    "cpp": {ADD: ("\n    return x + y;\n", "\n    return x - y;\n"),
            STRLEN: ("\n    return string.size();\n", "\n    return 0;\n")},
    "cs": {ADD: ("\n    public static long Add(long x, long y) {\n        return x + y;\n",
                 "\n    public static long Add(long x, long y) {\n        return x - y;\n"),
           STRLEN: ("\n    public static long Strlen(string str) {\n        return str.Length;\n",
                    "\n    public static long Strlen(string str) {\n        return 0;\n")},
    "d": {ADD: ("\n{\n    return x + y;\n}\n", "\n{\n    return x - y;\n}\n"),
          STRLEN: ("\n{\n    return cast(long) string.length;\n}\n", "\n{\n    return 0;\n}\n")},
    "elixir": {ADD: ("\n    x + y\n  end\nend\n", "\n    x - y\n  end\nend\n"),
               STRLEN: ("\n    String.length(string)\n  end\nend\n", "\n    0\n  end\nend\n")},
    "go": {ADD: ("\n    return x + y\n}\n", "\n    return x - y\n}\n"),
           STRLEN: ("\n    return len(myString)\n}\n", "\n    return 0\n}\n")},
    "hs": {ADD: (" x + y\n", " x - y\n"), STRLEN: (" length string\n", " 0\n")},
    "java": {ADD: ("\n        return x + y;\n", "\n        return x - y;\n"),
             STRLEN: ("\n        return string.length();\n", "\n        return 0;\n")},
    "js": {ADD: ("\n  return x + y;\n}\n", "\n  return x - y;\n}\n"),
           STRLEN: ("\n  return string.length;\n}\n", "\n  return 0;\n}\n")},
    "lua": {ADD: ("\n    return x + y\nend\n", "\n    return x - y\nend\n"),
            STRLEN: ("\n    return #string\nend\n", "\n    return 0\nend\n")},
    "ml": {ADD: ("\n  x + y\n", "\n  x - y\n"), STRLEN: ("\n  String.length string\n", "\n  0\n")},
    "php": {ADD: ("\n    return $x + $y;\n}\n", "\n    return $x - $y;\n}\n"),
            FIB: ("\n    return $n <= 2 ? 1 : fib($n - 1) + fib($n - 2);\n}\n", "\n    return $n;\n}\n")},
    "pl": {ADD: ("\n    return $x + $y;\n}\n", "\n    return $x - $y;\n}\n"),
           STRLEN: ("\n    return length($string);\n}\n", "\n    return 0;\n}\n")},
    "py": {ADD: ("\n    return x + y\n", "\n    return x - y\n"),
           STRLEN: ("\n    return len(string)\n", "\n    return 0\n")},
    "r": {ADD: ("\n  return(x + y)\n}\n", "\n  return(x - y)\n}\n"),
          STRLEN: ("\n  return(nchar(string))\n}\n", "\n  return(0)\n}\n")},
    "rb": {ADD: ("\n  x + y\nend\n", "\n  x - y\nend\n"), STRLEN: ("\n  string.length\nend\n", "\n  0\nend\n")},
    "rkt": {ADD: ("\n  (+ x y))\n", "\n  (- x y))\n"), STRLEN: ("\n  (string-length string))\n", "\n  0)\n")},
    "rs": {ADD: ("\n    x + y\n", "\n    x - y\n"), STRLEN: ("\n    string.len() as isize\n", "\n    0\n")},
    "scala": {ADD: ("\n        x + y\n", "\n        x - y\n"),
              STRLEN: ("\n        string.length.toLong\n", "\n        0L\n")},
    "sh": {ADD: ("\n    echo $(( $1 + $2 ))\n", "\n    echo $(( $1 - $2 ))\n"),
           STRLEN: ("\n    echo ${#1}\n", "\n    echo 0\n")},
    "swift": {ADD: ("\n    return x + y\n", "\n    return x - y\n"),
              STRLEN: ("\n    return string.count\n", "\n    return 0\n")},
    "ts": {ADD: ("\n  return x + y;\n}\n", "\n  return x - y;\n}\n"),
           STRLEN: ("\n  return string.length;\n}\n", "\n  return 0;\n}\n")},
}
