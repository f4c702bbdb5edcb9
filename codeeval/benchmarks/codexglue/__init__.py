"""CodeXGLUE's generation tasks, scored by BLEU: text-to-code (CoNaLa, Concode, Spider: text_to_code)
and code-to-text (code_to_text), with the two BLEU implementations they use (bleu) and the
Moses tokenizer code-to-text needs (moses)."""
