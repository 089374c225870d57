-- A passage in the slices the model reads whole. The local model reads 256 tokens of a
-- text, its marks and the title among them: an English passage of 1,200 characters
-- about whole, a German one to about its 667th character, Chinese to its 250th (QA).
-- Each slice (EmbeddingProvider.pieces) now has a vector of its own, labelled with its
-- passage, which is what a search shows. Vectors written before stand for what the model
-- read of their text until the text changes, or the model's vectors are re-embedded.
ALTER TABLE indexer.vectors ADD COLUMN piece smallint NOT NULL DEFAULT 0;
ALTER TABLE indexer.vectors DROP CONSTRAINT vectors_pkey;
ALTER TABLE indexer.vectors ADD PRIMARY KEY (item_id, model, passage, piece);
