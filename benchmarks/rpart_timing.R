# Times R's rpart on Table-1 trials for benchmarks/pmse_cart.py (which writes DIR and reads back).
#
#   Rscript benchmarks/rpart_timing.R DIR
#
# DIR/trials.csv: n, trials; DIR/trials.bin: float64 little-endian, per trial X, X', Xs (each
# n x 2, column-major); DIR/configs.csv: maxdepth, cp. For every trial and configuration it
# fits rpart(y ~ ., method = "class") on [X; Xs] and on [X'; Xs] (labels 0 then 1; defaults of
# rpart.control except cp, maxdepth and xval = 0): 16 fits per trial for the 8 Table-1
# configurations. Writes DIR/seconds.txt (elapsed seconds of the fits only, data frames built
# beforehand) and DIR/pmse.bin (float64: per trial, per configuration, pMSE(X) then pMSE(X')).
suppressPackageStartupMessages(library(rpart))
dir <- commandArgs(trailingOnly = TRUE)[1]
meta <- read.csv(file.path(dir, "trials.csv"))
configs <- read.csv(file.path(dir, "configs.csv"))
n <- meta$n[1]
trials <- meta$trials[1]
con <- file(file.path(dir, "trials.bin"), "rb")
values <- readBin(con, "double", n = trials * 3 * n * 2, size = 8, endian = "little")
close(con)
y <- factor(rep(c(0, 1), each = n), levels = c(0, 1))
frames <- vector("list", 2 * trials)
for (t in seq_len(trials)) {
  base <- (t - 1) * 6 * n
  block <- function(k) matrix(values[base + (k - 1) * 2 * n + seq_len(2 * n)], nrow = n, ncol = 2)
  synthetic <- block(3)
  for (v in 1:2) {
    z <- rbind(block(v), synthetic)
    frames[[2 * (t - 1) + v]] <- data.frame(x1 = z[, 1], x2 = z[, 2], y = y)
  }
}
controls <- lapply(seq_len(nrow(configs)), function(k)
  rpart.control(cp = configs$cp[k], maxdepth = configs$maxdepth[k], xval = 0))
out <- numeric(0)
started <- proc.time()[["elapsed"]]
for (t in seq_len(trials)) {
  for (k in seq_len(nrow(configs))) {
    for (v in 1:2) {
      fit <- rpart(y ~ ., data = frames[[2 * (t - 1) + v]], method = "class", control = controls[[k]])
      out <- c(out, mean((predict(fit, type = "prob")[, 2] - 0.5)^2))
    }
  }
}
seconds <- proc.time()[["elapsed"]] - started
writeLines(format(seconds, digits = 10), file.path(dir, "seconds.txt"))
con <- file(file.path(dir, "pmse.bin"), "wb")
writeBin(out, con, size = 8, endian = "little")
close(con)
