"""The ground floor every package of the project builds on, importing nothing of the project itself: the study's
model-name grammar (`names`), where data and sources are found (`paths`), and the files the project writes and
reads, written atomically (`artifacts`, `sentence_transformers_files`)."""
